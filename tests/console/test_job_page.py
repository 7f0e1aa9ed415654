"""The job page (issue 21.3): an HTML page for every job (progress, message, shards, error,
what it works on, cancel and retry) that every link to a job leads to instead of the API's
JSON; staff only, and a job an annotator could have started tells them nothing."""

import re

import pytest

from annotation.models import Study
from evaluation.reports import REPORT_JOB_KIND
from jobs.models import Job
from jobs.services import create_job, dispatch_children, job_progress
from retrieval import tasks
from retrieval.models import Run
from retrieval.services.runs import create_run, get_or_create_retriever
from tests.factories import make_annotator, make_relic_collection, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db

SECRET = "JOB-ERROR-SECRET-/srv/marginalia/uploads/4f2a"


def text(response) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", response.content.decode()).split())


@pytest.fixture
def sharded_run(django_capture_on_commit_callbacks):
    """A BM25 run queued in two shards, as start_run_async queues one: a parent job and one child
    per half of the queries."""
    run = create_run(make_relic_collection(4), get_or_create_retriever("bm25"))
    with django_capture_on_commit_callbacks(execute=True):
        run.job = create_job("retrieve", "cpu", {"run_id": run.pk, "retriever": "bm25", "collection": "c"})
        run.save(update_fields=["job"])
        dispatch_children(run.job, tasks.run_bm25, [[run.pk, [[0, 0, 2]]], [run.pk, [[0, 2, 4]]]])
    return run


def test_a_run_job_shows_its_progress_message_shards_and_run(staff_client, broker, sharded_run):
    run = sharded_run
    shard = run.job.children.order_by("pk").first()
    Job.objects.filter(pk__in=[shard.pk, run.job_id]).update(status=Job.Status.RUNNING)  # a worker took it
    job_progress(shard.pk)(0.5, "book 1 of 2")

    response = staff_client.get(f"/jobs/{run.job_id}/")

    page = text(response)
    assert response.status_code == 200
    assert f"Job {run.job_id}: retrieve" in page and f"run {run.pk}" in page
    assert "Status running" in page and "Queue cpu" in page and "0/2 shards done" in page
    assert 'aria-valuenow="25"' in response.content.decode()  # the shards' mean
    assert f'href="/runs/{run.pk}/"' in response.content.decode()
    rows = re.findall(r'<tr data-shard="(\d+)">(.*?)</tr>', response.content.decode(), re.S)
    assert [int(pk) for pk, _ in rows] == list(run.job.children.order_by("pk").values_list("pk", flat=True))
    assert "book 1 of 2" in rows[0][1] and "1 of 2" in rows[0][1] and "pending" in rows[1][1]
    assert f'data-job="{run.job_id}" data-finished="0"' in response.content.decode()
    assert "Cancel job" in page and "Retry job" not in page


def test_cancel_stops_a_pending_job_and_retry_queues_it_again(
    staff_client, broker, sharded_run, django_capture_on_commit_callbacks
):
    run = sharded_run
    broker.flushdb()

    cancelled = staff_client.post(f"/jobs/{run.job_id}/cancel/", follow=True)

    assert cancelled.redirect_chain == [(f"/jobs/{run.job_id}/", 302)]
    assert f"Job {run.job_id} cancelled." in text(cancelled) and "Retry job" in text(cancelled)
    assert Job.objects.get(pk=run.job_id).status == "cancelled"
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED

    with django_capture_on_commit_callbacks(execute=True):
        retried = staff_client.post(f"/jobs/{run.job_id}/retry/", follow=True)

    assert f"Job {run.job_id} queued again on the cpu queue." in text(retried)
    assert Job.objects.get(pk=run.job_id).status == "pending" and broker.llen("cpu") == 2
    assert Run.objects.get(pk=run.pk).status == Run.Status.PENDING
    assert "Cancel job" in text(retried)


def test_a_failed_job_shows_its_error_and_what_cannot_be_done_is_said_in_a_message(staff_client, broker):
    job = create_job("upload", "cpu", {"upload": "book", "file": "novel.txt"})
    Job.objects.filter(pk=job.pk).update(status=Job.Status.FAILED, error="InputError: novel.txt:3: bad\nmore")

    page = staff_client.get(f"/jobs/{job.pk}/")
    refused = staff_client.post(f"/jobs/{job.pk}/retry/", follow=True)  # an upload without its task
    already = staff_client.post(f"/jobs/{job.pk}/cancel/", follow=True)

    assert '<pre class="job-error" role="alert">InputError: novel.txt:3: bad\nmore</pre>' in page.content.decode()
    assert "novel.txt book upload" in text(page)
    assert "was not retried: job" in text(refused) and "cannot be retried" in text(refused)
    assert f"Job {job.pk} had already ended (failed); nothing to cancel." in text(already)


def test_a_shard_cannot_be_retried_alone_and_leads_back_to_its_job(staff_client, broker):
    parent = create_job("retrieve", "cpu", {})
    Job.objects.filter(pk=parent.pk).update(status=Job.Status.RUNNING)
    (shard,) = dispatch_children(parent, tasks.run_bm25, [[1, []]])
    Job.objects.filter(pk=shard.pk).update(status=Job.Status.FAILED, error="boom")

    page = staff_client.get(f"/jobs/{shard.pk}/").content.decode()

    assert f'href="/jobs/{parent.pk}/"' in page and "Retry job" not in page


def test_every_page_that_names_a_job_links_its_page_not_its_json(staff_client, settings):
    run = create_run(make_relic_collection(1), get_or_create_retriever("bm25"))
    run.job = create_job("retrieve", "cpu", {"run_id": run.pk})
    run.save(update_fields=["job"])
    study = make_relic_proxy_study(2)
    settings.MARGINALIA_REPORT_JOB_ITEMS = 1  # the report page queues its report as a job
    report_page = staff_client.get(f"/studies/{study.pk}/report/").content.decode()

    pages = {
        "/dashboard/": (staff_client.get("/dashboard/").content.decode(), run.job_id),
        f"/runs/{run.pk}/": (staff_client.get(f"/runs/{run.pk}/").content.decode(), run.job_id),
        "report": (report_page, Job.objects.get(kind=REPORT_JOB_KIND).pk),
    }
    for path, (html, job_id) in pages.items():
        assert f'href="/jobs/{job_id}/"' in html, path
        assert not re.search(r'href="/api/jobs/\d+/"', html), path
        assert f'data-job="{job_id}" data-finished="0"' in html, path


def test_a_judge_job_leads_to_its_study_panel_and_a_report_job_to_the_report(staff_client):
    study = make_relic_proxy_study(1)
    judging = create_job("judge", "long", {"study": study.pk, "judge": "gpt", "version": 2, "samples": 3})
    report = create_job(REPORT_JOB_KIND, "cpu", {"study": study.pk})

    assert f'href="/studies/{study.pk}/#judges"' in staff_client.get(f"/jobs/{judging.pk}/").content.decode()
    assert "gpt v2 on study" in text(staff_client.get(f"/jobs/{judging.pk}/"))
    assert f'href="/studies/{study.pk}/report/"' in staff_client.get(f"/jobs/{report.pk}/").content.decode()


# --- who may see a job ------------------------------------------------------------------------------


@pytest.fixture
def annotators_job():
    """A job of a kind an annotator could start (their account made it: an import of their own
    judgments, say), carrying what only staff may read: a server path in its error, a study's
    name in its parameters, a result."""
    annotator = make_annotator("curious")
    study = Study.objects.get(pk=make_relic_proxy_study(1, name="STUDY-NAME-SECRET").pk)
    job = create_job("upload", "cpu", {"upload": "judgments", "study": study.pk, "file": "mine.jsonl"}, user=annotator)
    Job.objects.filter(pk=job.pk).update(status=Job.Status.FAILED, error=SECRET, result={"gold": "RESULT-SECRET"})
    return annotator, job


@pytest.mark.parametrize("suffix", ["", "cancel/", "retry/"])
def test_anonymous_visitors_are_sent_to_sign_in_and_change_nothing(client, annotators_job, suffix):
    _, job = annotators_job
    for method in (client.get, client.post):
        response = method(f"/jobs/{job.pk}/{suffix}")
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert Job.objects.get(pk=job.pk).status == "failed"


@pytest.mark.parametrize("suffix", ["", "cancel/", "retry/"])
def test_an_annotator_is_refused_even_on_a_job_their_account_started_and_learns_nothing(client, annotators_job, suffix):
    annotator, job = annotators_job
    client.force_login(annotator)
    pending = create_job("upload", "cpu", {"file": "x"}, user=annotator)
    for target in (job, pending):
        for method in (client.get, client.post):
            response = method(f"/jobs/{target.pk}/{suffix}")
            body = response.content.decode()
            assert response.status_code == 403
            assert all(secret not in body for secret in (SECRET, "STUDY-NAME-SECRET", "RESULT-SECRET", "mine.jsonl"))
        api = client.get(f"/api/jobs/{target.pk}/")
        assert api.status_code == 403 and SECRET not in api.content.decode()
    assert [Job.objects.get(pk=j.pk).status for j in (job, pending)] == ["failed", "pending"]
    assert not Job.objects.filter(pk=pending.pk, cancel_requested=True).exists()


def test_a_missing_job_is_a_404_for_staff_and_a_403_for_annotators(client, staff_client):
    assert staff_client.get("/jobs/999999/").status_code == 404
    client.force_login(make_user("someone"))
    assert client.get("/jobs/999999/").status_code == 403
