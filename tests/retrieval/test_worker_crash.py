"""A training that does not finish leaves no trace but its Job: a crash or a killed worker leaves
the Job failed with the error, a cancellation leaves it cancelled, and in every case there is no
registered retriever and no model folder."""

import json
import os
import signal
import sqlite3
import time
from datetime import timedelta

import pytest
from celery.exceptions import WorkerLostError
from celery.signals import task_failure
from django.utils import timezone

import jobs.tasks  # noqa: F401  (connects the task_failure receiver, as every worker's start does)
from benchmarks.migrated import copy_migrated_sqlite
from jobs.management.commands.run_platform import broker_environment
from jobs.models import Job
from jobs.services import fail_stale_jobs, request_cancel
from marginalia.celery import app
from retrieval import tasks, training
from retrieval.models import Retriever
from retrieval.training import sweep_abandoned_work_folders
from retrieval.training_jobs import start_training_async
from tests.factories import make_code_word_collection
from tests.live_platform import manage, wait_for_job, worker_log

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]

FAST = {"batch_size": 6, "learning_rate": 1e-4, "epochs": 2}


@pytest.fixture
def eager_celery(monkeypatch):
    """Tasks run in this process when dispatched; their exceptions are recorded, not raised."""
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setitem(app.conf, "task_eager_propagates", False)


def fail_at_batch(monkeypatch, number: int, action) -> None:
    """Run `action()` when the training computes the loss of its `number`-th batch."""
    calls = []
    real_loss = training._Encoders.loss

    def loss(self, batch):
        calls.append(1)
        if len(calls) == number:
            action()
        return real_loss(self, batch)

    monkeypatch.setattr(training._Encoders, "loss", loss)


def artifacts(data_dir) -> list[str]:
    models = data_dir / "models"
    return sorted(path.name for path in models.iterdir()) if models.exists() else []


def test_a_crash_in_the_middle_of_training_fails_the_job_with_its_error(
    monkeypatch, eager_celery, django_capture_on_commit_callbacks, data_dir
):
    collection = make_code_word_collection()

    def crash():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    fail_at_batch(monkeypatch, 3, crash)

    with django_capture_on_commit_callbacks(execute=True):
        job = start_training_async(collection, name="crashing", **FAST)

    job.refresh_from_db()
    assert (job.status, job.kind, job.queue) == ("failed", "train", "gpu")
    assert job.error.startswith("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert not Retriever.objects.exists()
    assert artifacts(data_dir) == []


def test_cancelling_a_running_training_stops_it_and_registers_nothing(
    monkeypatch, eager_celery, django_capture_on_commit_callbacks, data_dir
):
    collection = make_code_word_collection()
    fail_at_batch(monkeypatch, 2, lambda: request_cancel(Job.objects.get(kind="train")))

    with django_capture_on_commit_callbacks(execute=True):
        job = start_training_async(collection, name="cancelled", **FAST)

    job.refresh_from_db()
    assert job.status == "cancelled" and job.error == ""
    assert not Retriever.objects.exists()
    assert artifacts(data_dir) == []


def test_a_finished_training_job_records_its_result_and_the_retriever_points_back_at_it(
    eager_celery, django_capture_on_commit_callbacks, data_dir
):
    collection = make_code_word_collection()

    with django_capture_on_commit_callbacks(execute=True):
        job = start_training_async(collection, name="finished", max_steps=2, **FAST)

    job.refresh_from_db()
    retriever = Retriever.objects.get(name="finished")
    assert (job.status, job.progress, job.result["retriever_id"]) == ("succeeded", 1.0, retriever.pk)
    assert retriever.training_job == job and retriever.trained_on == collection
    assert [name for name in artifacts(data_dir) if not name.startswith(".")] == [
        os.path.basename(os.path.dirname(retriever.model_path))
    ]
    assert not [name for name in artifacts(data_dir) if name.startswith(".")]


def test_a_killed_worker_reported_by_celery_fails_the_job(data_dir):
    job = Job.objects.create(kind="train", queue="gpu", status=Job.Status.RUNNING, celery_id="task-1")
    finished = Job.objects.create(kind="train", queue="gpu", status=Job.Status.SUCCEEDED, celery_id="task-2")

    for task_id, job_id in (("task-1", job.pk), ("task-2", finished.pk)):
        task_failure.send(
            sender=tasks.train_retriever,
            task_id=task_id,
            args=[job_id],
            exception=WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL) Job: 1."),
            kwargs={},
            traceback=None,
            einfo=None,
        )

    job.refresh_from_db()
    finished.refresh_from_db()
    assert job.status == "failed" and job.finished_at is not None
    assert job.error == "WorkerLostError: Worker exited prematurely: signal 9 (SIGKILL) Job: 1."
    assert finished.status == "succeeded" and finished.error == ""


def test_the_work_folder_of_a_killed_training_is_swept_once_its_job_has_finished(data_dir):
    dead = Job.objects.create(kind="train", queue="gpu", status=Job.Status.FAILED)
    alive = Job.objects.create(kind="train", queue="gpu", status=Job.Status.RUNNING)
    models = data_dir / "models"
    for name in (f".partial-job{dead.pk}-x-1", f".partial-job{alive.pk}-y-2", ".partial-local-z-3", "kept-4"):
        (models / name).mkdir(parents=True)

    sweep_abandoned_work_folders()

    assert artifacts(data_dir) == sorted([f".partial-job{alive.pk}-y-2", ".partial-local-z-3", "kept-4"])


def test_running_jobs_without_a_heartbeat_for_too_long_are_failed():
    now = timezone.now()
    silent = Job.objects.create(kind="train", status=Job.Status.RUNNING, heartbeat_at=now - timedelta(hours=2))
    busy = Job.objects.create(kind="train", status=Job.Status.RUNNING, heartbeat_at=now - timedelta(minutes=1))
    done = Job.objects.create(kind="train", status=Job.Status.SUCCEEDED, heartbeat_at=now - timedelta(hours=3))

    failed = fail_stale_jobs(timedelta(minutes=30))

    assert failed == [silent.pk]
    assert [Job.objects.get(pk=job.pk).status for job in (silent, busy, done)] == ["failed", "running", "succeeded"]
    assert "stopped reporting" in Job.objects.get(pk=silent.pk).error


def test_progress_reports_are_the_heartbeat(eager_celery, django_capture_on_commit_callbacks):
    collection = make_code_word_collection()
    before = timezone.now()

    with django_capture_on_commit_callbacks(execute=True):
        job = start_training_async(collection, name="beating", max_steps=1, **FAST)

    job.refresh_from_db()
    assert job.heartbeat_at >= before


# --- a real worker process, killed with SIGKILL mid-training --------------------------------------

# Redis and the worker come from tests/live_platform.py; its `worker` fixture runs on this
# module's `platform`, which adds a data folder for the model artifacts.

STARTUP_SECONDS = 180


@pytest.fixture(scope="module")
def platform(tmp_path_factory, redis_url):
    folder = tmp_path_factory.mktemp("training-platform")
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
        **broker_environment(redis_url),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "MARGINALIA_DATA_DIR": str(folder / "data"),
    }
    copy_migrated_sqlite(folder / "db.sqlite3")
    return {"env": env, "database": folder / "db.sqlite3", "folder": folder}


def job_row(database, job_id: int) -> dict:
    with sqlite3.connect(database, timeout=30) as connection:
        connection.row_factory = sqlite3.Row
        return dict(connection.execute("SELECT * FROM retrieval_job WHERE id = ?", (job_id,)).fetchone())


def wait_until_training_steps(database, job_id: int) -> dict:
    """The job's row once it reports optimisation steps (or has stopped, or time is up)."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        row = job_row(database, job_id)
        if (
            row["message"].startswith("step ")
            or row["status"] not in {"pending", "running"}
            or (time.monotonic() > deadline)
        ):
            return row
        time.sleep(0.5)


@pytest.mark.redis
def test_a_worker_killed_mid_training_leaves_the_job_failed_and_nothing_registered(worker, platform):
    manage(
        platform,
        "shell",
        "-c",
        "from tests.factories import make_code_word_collection\nmake_code_word_collection('codes')",
    )
    queued = manage(
        platform,
        "train_retriever",
        "--collection",
        "codes",
        "--name",
        "doomed",
        "--epochs",
        500,
        "--batch-size",
        6,
        "--async",
        "--json",
    )
    job_id = json.loads(queued.strip().splitlines()[-1])["job_id"]

    training_job = wait_until_training_steps(platform["database"], job_id)
    assert training_job["message"].startswith("step "), training_job["error"] or worker_log(platform)
    with open(f"/proc/{worker.pid}/task/{worker.pid}/children") as children:
        pool_processes = [int(pid) for pid in children.read().split()]
    for pid in pool_processes:  # the pool process running the task; the worker's main process survives
        os.kill(pid, signal.SIGKILL)

    job = wait_for_job(platform["database"], job_id)

    assert job["status"] == "failed", worker_log(platform)
    assert job["error"].startswith("WorkerLostError"), job["error"]
    with sqlite3.connect(platform["database"]) as connection:
        assert connection.execute("SELECT COUNT(*) FROM retrieval_retriever WHERE name = 'doomed'").fetchone() == (0,)
    models = platform["folder"] / "data" / "models"
    assert not [path.name for path in models.iterdir() if not path.name.startswith(".partial-")]
