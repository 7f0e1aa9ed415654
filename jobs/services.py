"""Background jobs: create, dispatch after commit, report progress, finish.

Celery tasks run their work through `execute`, with a progress callback (jobs.progress) that
writes to the Job row, which the dashboard polls; management commands pass a terminal bar instead.
The operation itself never knows which.
"""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from celery.signals import task_failure
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.models import Job

from .events import job_finished
from .progress import Progress


class JobCancelled(Exception):
    """Raised inside a running job when staff asked to cancel it."""


def create_job(kind: str, queue: str, parameters: dict | None = None, user=None) -> Job:
    return Job.objects.create(kind=kind, queue=queue, parameters=parameters or {}, created_by=user)


def dispatch(job: Job, task, *args: Any) -> Job:
    """Send `task(job.pk, *args)` to the job's queue once the surrounding transaction commits, so
    the worker never looks for a row that is not there yet."""
    job.celery_id = str(uuid.uuid4())
    job.save(update_fields=["celery_id"])
    transaction.on_commit(lambda: task.apply_async(args=[job.pk, *args], queue=job.queue, task_id=job.celery_id))
    return job


def job_progress(job_id: int) -> Progress:
    """A callback that records progress on the Job and stops the work if cancellation was asked."""

    def report(fraction: float, message: str = "") -> None:
        fraction = min(1.0, max(0.0, float(fraction)))
        alive = Job.objects.filter(pk=job_id, status=Job.Status.RUNNING, cancel_requested=False).update(
            progress=fraction, message=message[:500], heartbeat_at=timezone.now()
        )
        if not alive:  # cancelled by staff, or already failed as stale: stop the work here
            raise JobCancelled(f"job {job_id} is no longer running")

    return report


def request_cancel(job: Job) -> None:
    """Ask a job to stop. A pending job is cancelled at once; a running one stops at its next
    progress report."""
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)
    if Job.objects.filter(pk=job.pk, status=Job.Status.PENDING).update(
        status=Job.Status.CANCELLED, finished_at=timezone.now(), message="cancelled before it started"
    ):
        announce_finished(job.pk)


def execute(job_id: int, work: Callable[[Progress], dict]) -> dict:
    """Run `work(progress)` as job `job_id`, recording running / succeeded / failed / cancelled."""
    claimed = Job.objects.filter(pk=job_id, status=Job.Status.PENDING, cancel_requested=False).update(
        status=Job.Status.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    if not claimed:
        job = Job.objects.get(pk=job_id)
        return {"skipped": f"job is {job.status}"}
    try:
        result = work(job_progress(job_id)) or {}
    except JobCancelled:
        if Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
            status=Job.Status.CANCELLED, finished_at=timezone.now(), message="cancelled"
        ):
            announce_finished(job_id)
        return {"cancelled": True}
    except BaseException as exc:
        mark_failed(job_id, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        raise
    # Only a job still running succeeds: one failed meanwhile as stale keeps its verdict.
    if Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
        status=Job.Status.SUCCEEDED, progress=1.0, result=result, finished_at=timezone.now(), message="done"
    ):
        announce_finished(job_id)
    return result


def mark_failed(job_id: int, error: str) -> None:
    was_failed = Job.objects.filter(pk=job_id, status=Job.Status.FAILED).exists()
    if (
        Job.objects.filter(pk=job_id)
        .exclude(status__in=[Job.Status.SUCCEEDED, Job.Status.CANCELLED])
        .update(status=Job.Status.FAILED, error=error[:20000], finished_at=timezone.now())
        and not was_failed
    ):
        announce_finished(job_id)


def announce_finished(job_id: int) -> None:
    """Tell listeners (jobs.events.job_finished) that the job ended, right after the update that
    ended it (so once)."""
    job_finished.send(sender=Job, job=Job.objects.get(pk=job_id))


@task_failure.connect
def record_task_failure(sender=None, task_id=None, exception=None, **kwargs) -> None:
    """Fail the job of a task that died outside `execute`: when a worker process is killed
    (out of memory, SIGKILL), Celery's main process reports WorkerLostError here, since with
    acks_late and reject_on_worker_lost off the task is not re-run."""
    for job_id in Job.objects.filter(
        celery_id=task_id, status__in=[Job.Status.PENDING, Job.Status.RUNNING]
    ).values_list("pk", flat=True):
        mark_failed(job_id, f"{type(exception).__name__}: {exception}")


def fail_stale_jobs(older_than: timedelta) -> list[int]:
    """Fail running jobs with no sign of life for `older_than`: their worker vanished without
    even Celery noticing (the whole machine went down). Returns the ids failed."""
    cutoff = timezone.now() - older_than
    failed = []
    for job_id, heartbeat_at in Job.objects.filter(status=Job.Status.RUNNING, heartbeat_at__lt=cutoff).values_list(
        "pk", "heartbeat_at"
    ):
        # Re-checked in the update itself, so a job that reported meanwhile is left running.
        if Job.objects.filter(pk=job_id, status=Job.Status.RUNNING, heartbeat_at__lt=cutoff).update(
            status=Job.Status.FAILED,
            finished_at=timezone.now(),
            error=f"the worker stopped reporting: no progress since {heartbeat_at.isoformat()}",
        ):
            failed.append(job_id)
            announce_finished(job_id)
    return failed


def sweep_stale_jobs() -> list[int]:
    """`fail_stale_jobs` with the configured patience; called wherever staff look at jobs, so a
    vanished worker's job turns failed without a scheduler process."""
    return fail_stale_jobs(timedelta(minutes=settings.MARGINALIA_STALE_JOB_MINUTES))
