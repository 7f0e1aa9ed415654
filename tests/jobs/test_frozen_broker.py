"""A broker that accepts connections but never answers (Redis stopped with SIGSTOP) is refused as
quickly as one that is down, on every path that queues work: the command line, every API POST
that queues, the dashboard's forms and the report page that queues its computation, each within
a few seconds and leaving no job, run or uploaded file behind. An annotator's submit with a
webhook listening answers 201 with the judgment stored once; its event waits in the outbox and
the periodic redelivery sends it once the broker answers again.

Before: `retrieve --async` hung past 120 s, the API answered 500 after 30 s (the web server's
worker timeout) and so did the submit, though its judgment was stored."""

import importlib
import os
import signal
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from annotation.models import Judgment
from console import uploads
from integrations.models import WebhookDelivery
from integrations.services.delivery import deliver_due
from jobs.errors import BrokerUnavailable
from jobs.models import Job
from jobs.services import require_broker
from retrieval.models import Run
from tests.factories import (
    api_client,
    make_annotator,
    make_code_word_collection,
    make_relic_collection,
    make_relic_proxy_study,
    make_user,
    make_webhook,
    next_url,
    submit_url,
)
from tests.integrations.receiver_process import Receiver

pytestmark = [pytest.mark.django_db, pytest.mark.redis]

# The broker's deadline is MARGINALIA_BROKER_TIMEOUT_SECONDS (3 s); "quickly" leaves room for a
# loaded machine, and is far from the 30 s and 120 s the frozen broker cost before.
REFUSAL_SECONDS = 10
SECRET = "frozen-broker-secret"


@pytest.fixture
def staff():
    return api_client(make_user("researcher", staff=True))


def nothing_queued() -> tuple[int, int, bool]:
    """(runs, jobs, whether an uploaded file is left on disk)."""
    return Run.objects.count(), Job.objects.count(), any(path.is_file() for path in uploads.upload_folder().rglob("*"))


def timed(action):
    started = time.monotonic()
    result = action()
    return result, time.monotonic() - started


def test_the_health_check_refuses_a_frozen_broker_within_its_deadline(broker_frozen):
    started = time.monotonic()

    with pytest.raises(BrokerUnavailable, match=r"cannot be reached \(.*Timeout"):
        require_broker()

    assert time.monotonic() - started < REFUSAL_SECONDS


def test_every_command_that_queues_refuses_a_frozen_broker_within_seconds_and_leaves_nothing(broker_frozen):
    collection, codes = make_relic_collection(2), make_code_word_collection()
    failed = Job.objects.create(kind="retrieve", status=Job.Status.FAILED, task="retrieval.tasks.run_bm25")
    importlib.import_module("retrieval.training")  # torch loads once per process, broker or not
    commands = [
        ["retrieve", "--collection", collection.name, "--retriever", "bm25", "--async"],
        ["train_retriever", "--collection", codes.name, "--name", "never", "--async"],
        ["retry_job", str(failed.pk)],
    ]

    for command in commands:
        started = time.monotonic()
        with pytest.raises(CommandError, match=r"task queue at redis://127\.0\.0\.1:\d+/0 cannot be reached"):
            call_command(*command)
        assert time.monotonic() - started < REFUSAL_SECONDS, command

    assert nothing_queued() == (0, 1, False) and Job.objects.get().status == Job.Status.FAILED


def test_every_api_post_that_queues_answers_503_within_seconds_and_leaves_nothing(broker_frozen, staff, settings):
    settings.MARGINALIA_REPORT_JOB_ITEMS = 1  # the report of any study is computed by a job
    collection = make_code_word_collection()
    study = make_relic_proxy_study(2)
    failed = Job.objects.create(kind="retrieve", status=Job.Status.FAILED, task="retrieval.tasks.run_bm25")
    query, passage = collection.queries.first(), collection.passages.first()
    trec = SimpleUploadedFile("run.trec", f"{query.external_id} Q0 {passage.external_id} 1 1.0 tag\n".encode())
    requests = {
        "runs": lambda: staff.post("/api/runs/", {"collection": collection.pk, "retriever": "bm25"}, format="json"),
        "runs/import": lambda: staff.post(
            "/api/runs/import/", {"collection": collection.pk, "name": "imported", "file": trec}, format="multipart"
        ),
        "retrievers/train": lambda: staff.post(
            "/api/retrievers/train/", {"collection": collection.pk, "name": "never"}, format="json"
        ),
        "uploads": lambda: staff.post(
            "/api/uploads/",
            {"kind": "book", "title": "A book", "file": SimpleUploadedFile("book.txt", b"It was a dark night.\n")},
            format="multipart",
        ),
        "jobs/retry": lambda: staff.post(f"/api/jobs/{failed.pk}/retry/"),
        "studies/report": lambda: staff.get(f"/api/studies/{study.pk}/report/"),
    }
    runs_before, jobs_before = Run.objects.count(), Job.objects.count()
    importlib.import_module("retrieval.training")  # torch loads once per web process, broker or not

    for name, request in requests.items():
        response, seconds = timed(request)
        assert response.status_code == 503, (name, response.content)
        assert "cannot be reached" in response.json()["detail"], name
        assert seconds < REFUSAL_SECONDS, (name, seconds)

    failed.refresh_from_db()
    assert failed.status == Job.Status.FAILED
    assert (Run.objects.count(), Job.objects.count()) == (runs_before, jobs_before)
    assert nothing_queued()[2] is False


def test_the_dashboard_forms_show_the_refusal_within_seconds_and_leave_nothing(broker_frozen, staff_client):
    collection = make_relic_collection(2)
    run_form = {"collection": collection.pk, "retriever": "bm25", "k1": "0.5", "b": "0.9", "depth": "10", "model": ""}
    upload_form = {"kind": "book", "title": "A book", "file": SimpleUploadedFile("book.txt", b"A dark night.\n")}

    for url, form, status in (("/dashboard/", run_form, 400), ("/dashboard/upload/", upload_form, 503)):
        response, seconds = timed(lambda url=url, form=form: staff_client.post(url, form))
        assert response.status_code == status, (url, response.status_code)
        assert "cannot be reached" in response.content.decode(), url
        assert "Traceback" not in response.content.decode()
        assert seconds < REFUSAL_SECONDS, (url, seconds)

    assert nothing_queued() == (0, 0, False)


def test_a_page_that_queues_its_report_answers_503_with_the_reason(broker_frozen, staff_client, settings):
    settings.MARGINALIA_REPORT_JOB_ITEMS = 1
    study = make_relic_proxy_study(2)

    response, seconds = timed(lambda: staff_client.get(f"/studies/{study.pk}/report/"))

    assert response.status_code == 503 and seconds < REFUSAL_SECONDS
    assert "cannot be reached" in response.content.decode()
    assert Job.objects.count() == 0


@pytest.fixture
def receiver(tmp_path):
    server = Receiver(tmp_path, SECRET).start()
    yield server
    server.stop()


def test_a_submit_with_a_webhook_answers_201_and_the_event_arrives_once_the_broker_answers(
    broker_frozen, receiver, settings, django_capture_on_commit_callbacks
):
    settings.MARGINALIA_WEBHOOKS_ALLOW_PRIVATE = True
    study = make_relic_proxy_study(2, judgments_per_item=1)
    make_webhook(receiver.url, SECRET, events=[])  # every event: three for this submit
    annotator = api_client(make_annotator("reader"))
    item = annotator.get(next_url(study)).json()["item"]

    with django_capture_on_commit_callbacks(execute=True):
        answer = {"item": item, "position": 0}
        response, seconds = timed(lambda: annotator.post(submit_url(study), answer, format="json"))

    assert response.status_code == 201 and seconds < REFUSAL_SECONDS, (response.status_code, seconds)
    assert Judgment.objects.filter(item_id=item).count() == 1
    waiting = list(WebhookDelivery.objects.values_list("event", "status"))
    assert ("judgment.submitted", "pending") in waiting and {status for _, status in waiting} == {"pending"}
    assert receiver.requests() == []

    os.kill(broker_frozen.pid, signal.SIGCONT)  # the broker answers again; the redelivery sends
    summary = deliver_due()

    assert summary["delivered"] == len(waiting)
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}
    received = receiver.wait_for(len(waiting))
    assert sorted(request["body"]["event"] for request in received) == sorted(event for event, _ in waiting)
    assert Judgment.objects.filter(item_id=item).count() == 1
