"""A run's job never gets stuck and a half run is never served: queueing refuses at once when the
broker is down (leaving nothing behind), a cancelled or failed job settles its run (no partial
hits), the periodic sweep fails runs whose worker vanished, a failed job can be retried, and
every reader of hits refuses a run that did not finish."""

import time
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from jobs.models import Job
from jobs.services import execute, mark_failed, request_cancel, retry_job
from jobs.tasks import sweep_stale_jobs
from marginalia.celery import app
from retrieval.errors import InputError
from retrieval.metrics import evaluate_run
from retrieval.models import Hit, Run, RunQuery
from retrieval.selectors import trec_run_lines
from retrieval.services import runs
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever, start_run_async
from tests.factories import (
    api_client,
    call_json_command,
    make_code_word_collection,
    make_relic_collection,
    make_scored_run,
    make_user,
)

pytestmark = pytest.mark.django_db

# "Within seconds": the refusal used to come after 20.6 s (API) and 22 s (command) of retries.
REFUSAL_SECONDS = 10


@pytest.fixture
def staff():
    return api_client(make_user("researcher", staff=True))


@pytest.fixture
def eager(monkeypatch):
    """Tasks run in this process when sent, their errors recorded on the job, not raised."""
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setitem(app.conf, "task_eager_propagates", False)


def nothing_queued() -> tuple[int, int]:
    return Run.objects.count(), Job.objects.count()


# --- the broker is down ---------------------------------------------------------------------------


def test_retrieve_async_refuses_at_once_when_the_broker_is_down_and_leaves_nothing(broker_down):
    collection = make_relic_collection(2)
    started = time.monotonic()

    with pytest.raises(CommandError, match=r"task queue at redis://127\.0\.0\.1:\d+/0 cannot be reached"):
        call_command("retrieve", "--collection", collection.name, "--retriever", "bm25", "--async")

    assert time.monotonic() - started < REFUSAL_SECONDS
    assert nothing_queued() == (0, 0)


def test_the_run_api_answers_503_when_the_broker_is_down_and_leaves_nothing(broker_down, staff):
    collection = make_relic_collection(2)
    started = time.monotonic()

    response = staff.post("/api/runs/", {"collection": collection.pk, "retriever": "bm25"}, format="json")

    assert time.monotonic() - started < REFUSAL_SECONDS
    assert response.status_code == 503
    assert "cannot be reached" in response.json()["detail"] and "nothing was queued" in response.json()["detail"]
    assert nothing_queued() == (0, 0)


def test_the_dashboard_form_says_the_queue_is_down_and_leaves_nothing(broker_down, staff_client):
    collection = make_relic_collection(2)

    response = staff_client.post(
        "/dashboard/",
        {"collection": collection.pk, "retriever": "bm25", "k1": "0.5", "b": "0.9", "depth": "10", "model": ""},
    )

    assert response.status_code == 400
    assert "cannot be reached" in response.content.decode()
    assert nothing_queued() == (0, 0)


def test_the_training_api_answers_503_when_the_broker_is_down_and_leaves_nothing(broker_down, staff):
    collection = make_code_word_collection()

    response = staff.post("/api/retrievers/train/", {"collection": collection.pk, "name": "never"}, format="json")

    assert response.status_code == 503 and "cannot be reached" in response.json()["detail"]
    assert Job.objects.count() == 0


# --- cancelling, failing, sweeping -----------------------------------------------------------------


def test_cancelling_a_queued_run_settles_the_run(staff, django_capture_on_commit_callbacks):
    collection = make_relic_collection(2)
    with django_capture_on_commit_callbacks(execute=False):
        run = start_run_async(collection, get_or_create_retriever("bm25"), shards=2)

    response = staff.post(f"/api/jobs/{run.job_id}/cancel/")

    run.refresh_from_db()
    assert response.status_code == 202 and response.json()["status"] == "cancelled"
    assert run.status == Run.Status.CANCELLED
    assert set(run.job.children.values_list("status", flat=True)) == {Job.Status.CANCELLED}


def test_cancelling_a_running_run_stops_it_at_its_next_batch_and_removes_its_hits(
    eager, monkeypatch, django_capture_on_commit_callbacks
):
    """One shard, many batches: the cancel comes after the first batch's hits were written."""
    monkeypatch.setattr(runs, "MAX_SCORE_CELLS", 40)
    monkeypatch.setattr(runs.RunWriter, "FLUSH_ROWS", 1)
    monkeypatch.setattr(runs, "throttled", lambda progress: progress)
    collection = make_relic_collection(12)
    real_add = runs.RunWriter.add_ranked
    hits_when_cancelled = []

    def add_then_cancel(writer, *block):
        real_add(writer, *block)
        if not hits_when_cancelled:
            hits_when_cancelled.append(Hit.objects.count())
            request_cancel(Job.objects.get(kind="retrieve"))

    monkeypatch.setattr(runs.RunWriter, "add_ranked", add_then_cancel)

    with django_capture_on_commit_callbacks(execute=True):
        run = start_run_async(collection, get_or_create_retriever("bm25"), shards=1)

    run.refresh_from_db()
    assert hits_when_cancelled[0] > 0
    assert (run.status, run.job.status) == (Run.Status.CANCELLED, Job.Status.CANCELLED)
    assert run.job.children.get().status == Job.Status.CANCELLED
    assert not Hit.objects.filter(run=run).exists() and not RunQuery.objects.filter(run=run).exists()


def test_a_run_reports_progress_and_heartbeat_after_every_batch_of_queries(monkeypatch):
    monkeypatch.setattr(runs, "MAX_SCORE_CELLS", 40)  # the book has 80 windows: 1 query per batch
    monkeypatch.setattr(runs, "throttled", lambda progress: progress)
    collection = make_relic_collection(6)
    job = Job.objects.create(kind="retrieve", status=Job.Status.PENDING)
    beats = []
    real_add = runs.RunWriter.add_ranked

    def add(writer, *block):
        real_add(writer, *block)
        beats.append(Job.objects.get(pk=job.pk).heartbeat_at)

    monkeypatch.setattr(runs.RunWriter, "add_ranked", add)

    run = create_run(collection, get_or_create_retriever("bm25"))
    execute(job.pk, lambda progress: runs.run_summary(execute_run(run, progress)))

    assert len(beats) == 6 and beats == sorted(beats) and beats[0] < beats[-1]
    assert Job.objects.get(pk=job.pk).status == Job.Status.SUCCEEDED


def test_the_periodic_sweep_fails_a_run_whose_worker_vanished_and_removes_its_hits(settings):
    settings.MARGINALIA_STALE_JOB_MINUTES = 30
    collection = make_relic_collection(2)
    run = make_scored_run(collection, {"quote0": {"book:10:1": 2.5}, "quote1": {"book:20:1": 0.5}})
    job = Job.objects.create(
        kind="retrieve", status=Job.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(minutes=31)
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, job=job)

    sweep_stale_jobs.apply()

    run.refresh_from_db()
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and "stopped reporting" in job.error
    assert run.status == Run.Status.FAILED and not Hit.objects.filter(run=run).exists()


def test_a_failed_shard_with_attempts_left_is_queued_again_alone(broker, django_capture_on_commit_callbacks):
    collection = make_relic_collection(2)
    with django_capture_on_commit_callbacks(execute=True):
        run = start_run_async(collection, get_or_create_retriever("bm25"), shards=1)
    shard = run.job.children.get()
    Job.objects.filter(pk=shard.pk).update(status=Job.Status.RUNNING, attempts=1)
    broker.flushdb()

    with django_capture_on_commit_callbacks(execute=True):
        mark_failed(shard.pk, "WorkerLostError: Worker exited prematurely: signal 9 (SIGKILL)")

    shard.refresh_from_db()
    run.refresh_from_db()
    assert (shard.status, shard.attempts, broker.llen("cpu")) == (Job.Status.PENDING, 1, 1)
    assert shard.message.startswith("attempt 1 failed: WorkerLostError")
    assert run.status == Run.Status.PENDING and run.job.status == Job.Status.PENDING


def test_a_shard_that_fails_for_good_fails_the_run_and_stops_the_other_shards(
    broker, django_capture_on_commit_callbacks, settings, monkeypatch
):
    settings.MARGINALIA_SHARD_RETRIES = 0
    monkeypatch.setattr(runs, "MAX_SCORE_CELLS", 1)  # one query per batch: the one set splits in two
    collection = make_relic_collection(4)
    with django_capture_on_commit_callbacks(execute=True):
        run = start_run_async(collection, get_or_create_retriever("bm25"), shards=2)
    first, second = run.job.children.order_by("pk")
    Job.objects.filter(pk__in=[first.pk, second.pk]).update(status=Job.Status.RUNNING, attempts=1)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)

    mark_failed(first.pk, "RuntimeError: disk full")

    run.refresh_from_db()
    statuses = {job.pk: (job.status, job.cancel_requested) for job in Job.objects.all()}
    assert statuses[run.job_id][0] == Job.Status.FAILED
    assert statuses[first.pk] == (Job.Status.FAILED, False)
    assert statuses[second.pk] == (Job.Status.RUNNING, True)  # stops at its next report
    assert "part 1 failed after 1 attempts: RuntimeError: disk full" in Job.objects.get(pk=run.job_id).error
    assert run.status == Run.Status.FAILED


def test_a_failed_run_job_can_be_retried_and_then_completes(
    eager, monkeypatch, staff, settings, django_capture_on_commit_callbacks
):
    settings.MARGINALIA_SHARD_RETRIES = 0
    collection = make_relic_collection(3)
    real_scorer = runs.scorer_for

    def broken_scorer(retriever, run_parameters=None):
        raise RuntimeError("disk full")

    monkeypatch.setattr(runs, "scorer_for", broken_scorer)
    with django_capture_on_commit_callbacks(execute=True):
        run = start_run_async(collection, get_or_create_retriever("bm25"), shards=1)
    run.refresh_from_db()
    assert (run.status, run.job.status) == (Run.Status.FAILED, Job.Status.FAILED)
    assert "RuntimeError: disk full" in run.job.error

    monkeypatch.setattr(runs, "scorer_for", real_scorer)
    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post(f"/api/jobs/{run.job_id}/retry/")

    run.refresh_from_db()
    assert response.status_code == 202
    assert (run.status, run.job.status) == (Run.Status.DONE, Job.Status.SUCCEEDED)
    assert Hit.objects.filter(run=run).count() == 3 * collection.passages.count()
    assert staff.post(f"/api/jobs/{run.job_id}/retry/").status_code == 409  # nothing to retry


def test_retry_job_refuses_a_running_job_and_a_shard():
    parent = Job.objects.create(kind="retrieve", status=Job.Status.RUNNING)
    shard = Job.objects.create(kind="retrieve-shard", status=Job.Status.FAILED, parent=parent, task="x")

    with pytest.raises(ValueError, match="only a failed or cancelled job"):
        retry_job(parent)
    with pytest.raises(ValueError, match=f"is part of job {parent.pk}"):
        retry_job(shard)
    with pytest.raises(CommandError, match="only a failed or cancelled job"):
        call_command("retry_job", str(parent.pk))


# --- readers refuse a run that did not finish --------------------------------------------------------


@pytest.fixture
def unfinished_runs():
    collection = make_relic_collection(2)
    made = {}
    for status in (Run.Status.PENDING, Run.Status.RUNNING, Run.Status.FAILED, Run.Status.CANCELLED):
        run = make_scored_run(collection, {"quote0": {"book:10:1": 2.5}})
        Run.objects.filter(pk=run.pk).update(status=status)
        made[status] = Run.objects.get(pk=run.pk)
    return made


@pytest.mark.parametrize("status", ["pending", "running", "failed", "cancelled"])
def test_export_run_refuses_a_run_that_did_not_finish(unfinished_runs, status, capsys):
    run = unfinished_runs[status]

    with pytest.raises(CommandError, match=f"run {run.pk} is {status}, not done"):
        call_command("export_run", str(run.pk))
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("status", ["pending", "running", "failed", "cancelled"])
def test_the_trec_api_refuses_a_run_that_did_not_finish(unfinished_runs, status, staff):
    run = unfinished_runs[status]

    response = staff.get(f"/api/runs/{run.pk}/trec/", HTTP_ACCEPT="text/plain")

    assert response.status_code == 400
    assert f"run {run.pk} is {status}, not done" in response.content.decode()


def test_metrics_studies_and_reports_refuse_a_run_that_did_not_finish(unfinished_runs):
    run = unfinished_runs["running"]

    with pytest.raises(InputError, match="is running, not done"):
        evaluate_run(run)
    with pytest.raises(InputError, match="is running, not done"):
        list(trec_run_lines(run))
    with pytest.raises(CommandError, match="is running, not done"):
        call_json_command(
            "create_study",
            "--kind",
            "proxy",
            "--collection",
            run.collection.name,
            "--negatives-from",
            str(run.pk),
            "--items",
            "1",
            "--seed",
            "1",
            "--name",
            "s",
        )
    with pytest.raises(CommandError, match="is running, not done"):
        call_json_command(
            "create_study",
            "--kind",
            "relevance",
            "--collection",
            run.collection.name,
            "--runs",
            str(run.pk),
            "--seed",
            "1",
            "--name",
            "r",
            "--scale",
            "binary",
        )
