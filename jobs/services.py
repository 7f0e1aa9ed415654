"""Background jobs: create, dispatch after commit, report progress, finish, retry.

Celery tasks run their work through `execute`, with a progress callback (jobs.progress) that
writes to the Job row, which the dashboard polls; management commands pass a terminal bar instead.
The operation itself never knows which.

A job may have children (the shards of a run): each child is claimed, reported, retried and
failed on its own; the parent is running once a child started, shows the children's mean
progress and heartbeat, fails (and cancels the other children) when a child fails for good, and
succeeds when the app that owns it says the whole is complete (`finish_job`). Every failed or
cancelled ending is announced with `jobs.signals.job_ended`, so the rows a job was writing are
settled whatever stopped it.
"""

from __future__ import annotations

import os
import socket
import traceback
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, F, Q
from django.utils import timezone
from kombu.utils.url import maybe_sanitize_url

from jobs.models import Job
from marginalia.celery import app

from .errors import BrokerUnavailable, JobCancelled
from .events import job_finished
from .progress import Progress
from .signals import job_ended, job_requeued

ACTIVE = (Job.Status.PENDING, Job.Status.RUNNING)
ENDED = (Job.Status.FAILED, Job.Status.CANCELLED)


def broker_address() -> str:
    """The broker's URL without its password, for messages."""
    return maybe_sanitize_url(app.conf.broker_url)


def require_broker() -> None:
    """Raise BrokerUnavailable unless the broker accepts a connection within
    MARGINALIA_BROKER_TIMEOUT_SECONDS (one attempt, no retries)."""
    if app.conf.task_always_eager:
        return
    try:
        with app.connection_for_write(connect_timeout=settings.MARGINALIA_BROKER_TIMEOUT_SECONDS) as connection:
            connection.ensure_connection(max_retries=0, timeout=settings.MARGINALIA_BROKER_TIMEOUT_SECONDS)
    except Exception as exc:  # kombu and redis raise several kinds of connection errors
        raise BrokerUnavailable(
            f"the task queue at {broker_address()} cannot be reached ({type(exc).__name__}: {exc}); "
            "nothing was queued. Start Redis and a worker (run_platform does both), or run without --async."
        ) from None


def create_job(kind: str, queue: str, parameters: dict | None = None, user=None, **fields) -> Job:
    """A pending job. Refuses (BrokerUnavailable) when no worker could ever be told about it;
    called inside the caller's transaction, the refusal leaves no row behind."""
    require_broker()
    return Job.objects.create(kind=kind, queue=queue, parameters=parameters or {}, created_by=user, **fields)


def _load_tasks(names: Iterable[str]) -> None:
    """A web process or command has not imported every app's tasks module (they are named, not
    imported, by the code that queues them): when CELERY_TASK_ALWAYS_EAGER is set, load them the
    way a worker does, once, so a task runs in place. A message to a worker needs only the name:
    loading every tasks module there (the openai client, scipy) cost the first start seconds."""
    if app.conf.task_always_eager and any(name not in app.tasks for name in names):
        app.loader.import_default_modules()


def send_task(name: str, args: list, **options: Any) -> None:
    """Queue one task that has no Job row, by name (a webhook delivery keeps its own outbox row
    and retries itself)."""
    _load_tasks([name])
    app.signature(name, args=args).apply_async(**options)


def _publish(jobs: Sequence[Job]) -> None:
    """Send the jobs' tasks, one message each, over one producer connection: a group of messages
    that any free worker takes one at a time. (Not `celery.group`: that subscribes to every
    member's result in the result backend, which the Job rows make useless, and which would keep
    the web process waiting on a backend it never reads.) If the broker refuses, the jobs are
    failed and announced, and the caller gets BrokerUnavailable."""
    _load_tasks(job.task for job in jobs)
    try:
        with app.producer_or_acquire() as producer:
            for job in jobs:
                # By name: a process that never imported the task's module (retry_job) sends it too.
                # Results are ignored: the Job row is the result, so nothing waits on the backend.
                app.signature(
                    job.task, args=[job.pk, *job.arguments], queue=job.queue, task_id=job.celery_id
                ).apply_async(producer=producer, ignore_result=True)
    except Exception as exc:  # the broker went away between the check and the commit
        message = f"the task queue at {broker_address()} refused the job ({type(exc).__name__}: {exc})"
        for job in jobs:
            _end(job.pk, Job.Status.FAILED, message)
        raise BrokerUnavailable(message) from None


def dispatch(job: Job, task, *args: Any) -> Job:
    """Send `task(job.pk, *args)` to the job's queue once the surrounding transaction commits, so
    the worker never looks for a row that is not there yet. The task and its arguments are kept
    on the job, so it can be retried."""
    job.celery_id, job.task, job.arguments = str(uuid.uuid4()), task.name, list(args)
    job.save(update_fields=["celery_id", "task", "arguments"])
    transaction.on_commit(lambda: _publish([job]))
    return job


def dispatch_children(parent: Job, task, argument_lists: Sequence[list], *, max_attempts: int = 1) -> list[Job]:
    """Create one child of `parent` per argument list and send them all as one Celery group
    after commit: any free worker takes the next one."""
    children = Job.objects.bulk_create(
        Job(
            kind=f"{parent.kind}-shard",
            queue=parent.queue,
            parent=parent,
            created_by=parent.created_by,
            parameters={"shard": number + 1, "of": len(argument_lists)},
            celery_id=str(uuid.uuid4()),
            task=task.name,
            arguments=list(arguments),
            max_attempts=max_attempts,
        )
        for number, arguments in enumerate(argument_lists)
    )
    children = list(Job.objects.filter(parent=parent).order_by("pk"))
    transaction.on_commit(lambda: _publish(children))
    return children


def job_progress(job_id: int) -> Progress:
    """A callback that records progress on the Job (and its parent's overall progress) and stops
    the work if cancellation was asked."""
    parent_id = Job.objects.filter(pk=job_id).values_list("parent_id", flat=True).first()

    def report(fraction: float, message: str = "") -> None:
        fraction = min(1.0, max(0.0, float(fraction)))
        alive = Job.objects.filter(pk=job_id, status=Job.Status.RUNNING, cancel_requested=False).update(
            progress=fraction, message=message[:500], heartbeat_at=timezone.now()
        )
        if not alive:  # cancelled by staff, or already failed as stale: stop the work here
            raise JobCancelled(f"job {job_id} is no longer running")
        if parent_id:
            _report_parent(parent_id)

    return report


def _report_parent(parent_id: int) -> None:
    """A parent's progress is its children's mean; any child's report is its heartbeat."""
    children = Job.objects.filter(parent_id=parent_id)
    mean = children.aggregate(mean=Avg("progress"))["mean"] or 0.0
    done = children.filter(status=Job.Status.SUCCEEDED).count()
    Job.objects.filter(pk=parent_id, status=Job.Status.RUNNING).update(
        progress=mean, heartbeat_at=timezone.now(), message=f"{done}/{children.count()} shards done"
    )


def request_cancel(job: Job) -> None:
    """Ask a job to stop. A pending job is cancelled at once; a running one stops at its next
    progress report. Cancelling a parent cancels it at once and stops all its children."""
    Job.objects.filter(Q(pk=job.pk) | Q(parent_id=job.pk), status__in=ACTIVE).update(cancel_requested=True)
    pending = Q(status=Job.Status.PENDING) | Q(status=Job.Status.RUNNING, children__isnull=False)
    for job_id in (
        Job.objects.filter(pending, Q(pk=job.pk) | Q(parent_id=job.pk)).distinct().values_list("pk", flat=True)
    ):
        _end(job_id, Job.Status.CANCELLED, "cancelled")


def _end(job_id: int, status: str, error: str = "") -> bool:
    """Move an unfinished job to failed or cancelled and announce it. False if it had already
    finished (its first verdict stands)."""
    fields = {"status": status, "finished_at": timezone.now()}
    if status == Job.Status.FAILED:
        fields["error"] = error[:20000]
    else:
        fields["message"] = error[:500] or "cancelled"
    if not Job.objects.filter(pk=job_id, status__in=ACTIVE).update(**fields):
        return False
    job_ended.send(sender=Job, job_id=job_id, status=status)
    announce_finished(job_id)
    return True


def announce_finished(job_id: int) -> None:
    """Tell the apps above (jobs.events.job_finished: webhooks) that a job ended, right after the
    update that ended it, so once. Shards are parts of their parent's work: only the parent is told."""
    job = Job.objects.get(pk=job_id)
    if job.parent_id is None:
        job_finished.send(sender=Job, job=job)


def execute(job_id: int, work: Callable[[Progress], dict]) -> dict:
    """Run `work(progress)` as job `job_id`, recording running / succeeded / failed / cancelled.
    A child job that fails is retried while it has attempts left."""
    now = timezone.now()
    claimed = Job.objects.filter(pk=job_id, status=Job.Status.PENDING, cancel_requested=False).update(
        status=Job.Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        attempts=F("attempts") + 1,
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )
    if not claimed:
        job = Job.objects.get(pk=job_id)
        return {"skipped": f"job is {job.status}"}
    parent_id = Job.objects.filter(pk=job_id).values_list("parent_id", flat=True).first()
    if parent_id:
        Job.objects.filter(pk=parent_id, status=Job.Status.PENDING).update(
            status=Job.Status.RUNNING, started_at=now, heartbeat_at=now
        )
    try:
        result = work(job_progress(job_id)) or {}
    except JobCancelled:
        _end(job_id, Job.Status.CANCELLED)
        return {"cancelled": True}
    except BaseException as exc:
        mark_failed(job_id, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        raise
    # Only a job still running succeeds: one failed meanwhile as stale keeps its verdict.
    if Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
        status=Job.Status.SUCCEEDED, progress=1.0, result=result, finished_at=timezone.now(), message="done"
    ):
        announce_finished(job_id)
    if parent_id:
        _report_parent(parent_id)
    return result


def finish_job(job_id: int, result: dict) -> bool:
    """Mark a running job succeeded with `result` (a parent, once its owner has put the children's
    work together). False if it is no longer running."""
    finished = Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
        status=Job.Status.SUCCEEDED, progress=1.0, result=result, finished_at=timezone.now(), message="done"
    )
    if finished:
        announce_finished(job_id)
    return bool(finished)


def mark_failed(job_id: int, error: str) -> None:
    """A job's work failed or its worker was lost: retry it if it has attempts left, else fail it
    for good (and, for a child, its parent and the rest of the children)."""
    job = Job.objects.filter(pk=job_id, status__in=ACTIVE).first()
    if job is None:
        return
    if job.task and max(job.attempts, 1) < job.max_attempts and not job.cancel_requested:
        _requeue(job, note=f"attempt {job.attempts} failed: {error.splitlines()[0] if error else ''}")
        return
    if _end(job_id, Job.Status.FAILED, error) and job.parent_id:
        shard = job.parameters.get("shard", job.pk)
        _end(job.parent_id, Job.Status.FAILED, f"part {shard} failed after {job.attempts} attempts: {error}")
        request_cancel(Job(pk=job.parent_id))  # the other parts stop; the parent stays failed


def _requeue(job: Job, note: str = "") -> None:
    """Send a job's task again as a fresh pending job (same row, new Celery id)."""
    job.celery_id = str(uuid.uuid4())
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.PENDING,
        celery_id=job.celery_id,
        progress=0.0,
        message=note[:500],
        finished_at=None,
        started_at=None,
    )
    transaction.on_commit(lambda: _publish([job]))


def retry_job(job: Job) -> Job:
    """Run a failed or cancelled job again (staff's retry): a plain job is queued again as it
    was; a parent queues all its children again. Its owner is told (`job_requeued`) so that the
    rows it settled go back to pending. Raises ValueError for a job that cannot be retried."""
    if job.status not in ENDED:
        raise ValueError(f"job {job.pk} is {job.status}; only a failed or cancelled job can be retried")
    if job.parent_id:
        raise ValueError(f"job {job.pk} is part of job {job.parent_id}; retry that one")
    children = list(job.children.order_by("pk"))
    if not job.task and not children:
        raise ValueError(f"job {job.pk} does not record its task, so it cannot be retried")
    require_broker()
    with transaction.atomic():
        reset = {
            "status": Job.Status.PENDING,
            "progress": 0.0,
            "message": "retried",
            "error": "",
            "cancel_requested": False,
            "finished_at": None,
            "started_at": None,
        }
        Job.objects.filter(pk=job.pk).update(**reset)
        for child in children:
            child.celery_id = str(uuid.uuid4())
            Job.objects.filter(pk=child.pk).update(**reset, attempts=0, celery_id=child.celery_id)
        job_requeued.send(sender=Job, job_id=job.pk)
        if children:
            transaction.on_commit(lambda: _publish(children))
        else:
            job.celery_id = str(uuid.uuid4())
            Job.objects.filter(pk=job.pk).update(celery_id=job.celery_id)
            transaction.on_commit(lambda: _publish([job]))
    job.refresh_from_db()
    return job


def fail_stale_jobs(older_than: timedelta) -> list[int]:
    """Fail (or retry) running jobs with no sign of life for `older_than`: their worker vanished
    without even Celery noticing (the whole machine went down). A parent is left to its
    children. Returns the ids failed or retried."""
    cutoff = timezone.now() - older_than
    stale = []
    for job_id, heartbeat_at in Job.objects.filter(
        status=Job.Status.RUNNING, heartbeat_at__lt=cutoff, children__isnull=True
    ).values_list("pk", "heartbeat_at"):
        # Re-checked at the moment of failing, so a job that reported meanwhile is left running.
        if Job.objects.filter(pk=job_id, status=Job.Status.RUNNING, heartbeat_at__lt=cutoff).exists():
            mark_failed(job_id, f"the worker stopped reporting: no progress since {heartbeat_at.isoformat()}")
            stale.append(job_id)
    return stale


def sweep_stale_jobs() -> list[int]:
    """`fail_stale_jobs` with the configured patience; run every minute by Celery beat
    (jobs.tasks.sweep_stale_jobs, CELERY_BEAT_SCHEDULE)."""
    return fail_stale_jobs(timedelta(minutes=settings.MARGINALIA_STALE_JOB_MINUTES))
