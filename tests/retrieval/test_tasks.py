"""Celery tasks: BM25 runs go to the CPU queue and dense runs to the GPU queue, and a task's Job
records how the work went (progress, result, or the error)."""

import pytest

from jobs.models import Job
from jobs.services import execute
from jobs.tasks import ping
from marginalia.celery import app
from retrieval import tasks
from retrieval.models import Run
from retrieval.services import runs
from retrieval.services.runs import get_or_create_retriever, start_run_async
from tests.factories import add_qrels, call_json_command, make_collection, make_text_passages, make_text_query


@pytest.mark.parametrize(
    "task, queue",
    [
        (tasks.run_bm25, "cpu"),
        (tasks.run_dense, "gpu"),
        (ping, "cpu"),
    ],
)
def test_tasks_are_routed_to_their_queue_by_name(task, queue):
    assert app.amqp.router.route({}, task.name)["queue"].name == queue


def test_ping_answers():
    assert ping.apply().get() == "pong"


@pytest.fixture
def eager(monkeypatch):
    """Tasks run in this process when sent, as with CELERY_TASK_ALWAYS_EAGER."""
    monkeypatch.setitem(app.conf, "task_always_eager", True)


def small_collection():
    collection = make_collection()
    passages = make_text_passages(collection, ["Darcy proposes at Hunsford.", "Elizabeth refuses.", "Rain."])
    add_qrels(make_text_query(collection, "Darcy proposes"), {passages[0]: 1})
    return collection


@pytest.mark.django_db(transaction=True)
def test_an_async_bm25_run_executes_on_the_cpu_queue_and_completes_its_job(eager):
    collection = small_collection()

    run = start_run_async(collection, get_or_create_retriever("bm25"), depth=2)

    job = Job.objects.get(pk=run.job_id)
    run.refresh_from_db()
    assert (job.kind, job.queue, job.status, job.progress) == ("retrieve", "cpu", Job.Status.SUCCEEDED, 1.0)
    assert job.result == {"run_id": run.pk, "queries": 1, "seconds": run.seconds}
    assert job.parameters["run_id"] == run.pk and job.parameters["shards"] == 1
    assert [(shard.status, shard.task, shard.attempts) for shard in job.children.all()] == [
        (Job.Status.SUCCEEDED, "retrieval.tasks.run_bm25", 1)
    ]
    assert run.status == Run.Status.DONE and run.hits.count() == 2


@pytest.mark.django_db(transaction=True)
def test_retrieve_async_prints_the_run_and_its_job(eager):
    collection = small_collection()

    summary = call_json_command("retrieve", "--collection", collection.name, "--retriever", "bm25", "--async")

    job = Job.objects.get(pk=summary["job_id"])
    assert job.status == Job.Status.SUCCEEDED and job.result["run_id"] == summary["run_id"]
    assert Run.objects.get(pk=summary["run_id"]).job == job


@pytest.mark.django_db(transaction=True)
def test_a_failing_run_records_the_error_on_its_job(eager, monkeypatch):
    collection = small_collection()

    def broken_scorer(retriever, run_parameters=None):
        raise RuntimeError("index could not be built")

    monkeypatch.setattr(runs, "scorer_for", broken_scorer)

    run = start_run_async(collection, get_or_create_retriever("bm25"))

    job = Job.objects.get(pk=run.job_id)
    run.refresh_from_db()
    assert job.status == Job.Status.FAILED and "RuntimeError: index could not be built" in job.error
    assert job.finished_at is not None
    assert run.status == Run.Status.FAILED and not run.hits.exists()


@pytest.mark.django_db
def test_a_dense_run_is_sent_to_the_gpu_queue_after_commit(broker, django_capture_on_commit_callbacks):
    collection = small_collection()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = start_run_async(collection, get_or_create_retriever("dense", model="/models/minilm"))
    assert broker.llen("gpu") == 0  # nothing is sent before the run and job rows are committed
    for callback in callbacks:
        callback()

    job = run.job
    shard = job.children.get()
    assert (job.kind, job.queue, job.status) == ("retrieve", "gpu", Job.Status.PENDING)
    assert (shard.kind, shard.queue, shard.task, shard.arguments) == (
        "retrieve-shard",
        "gpu",
        "retrieval.tasks.run_dense",
        [run.pk, list(collection.queries.values_list("pk", flat=True))],  # the shard's queries
    )
    assert (broker.llen("gpu"), broker.llen("cpu")) == (1, 0)
    assert run.parameters["model"] == "/models/minilm"


@pytest.mark.django_db
def test_a_job_failed_as_stale_keeps_its_verdict_and_its_work_stops_at_the_next_report():
    job = Job.objects.create(kind="train", queue="gpu")
    reports = []

    def work(progress):
        Job.objects.filter(pk=job.pk).update(status=Job.Status.FAILED, error="the worker stopped reporting")
        reports.append("before")
        progress(0.5, "halfway")
        reports.append("after")  # never reached: the report sees the job is no longer running
        return {"done": True}

    assert execute(job.pk, work) == {"cancelled": True}
    job.refresh_from_db()
    assert (job.status, reports) == (Job.Status.FAILED, ["before"])
