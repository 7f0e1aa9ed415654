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

import itertools
import logging
import os
import re
import socket
import time
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

logger = logging.getLogger(__name__)

ACTIVE = (Job.Status.PENDING, Job.Status.RUNNING)
ENDED = (Job.Status.FAILED, Job.Status.CANCELLED)


def broker_address() -> str:
    """The broker's URL without its password, for messages."""
    return maybe_sanitize_url(app.conf.broker_url)


def require_broker() -> None:
    """Raise BrokerUnavailable unless the broker accepts a connection and answers a PING within
    MARGINALIA_BROKER_TIMEOUT_SECONDS (one attempt, no retries): a closed port and a broker that
    accepts connections but never answers (a frozen Redis) are refused alike, by the socket
    deadlines of CELERY_BROKER_TRANSPORT_OPTIONS."""
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


# After a send without a Job was refused, this process skips that broker for this long: a web
# request that announces several events (a submit completing an item and its study) waits for
# one refusal, not one per event, and the requests after it not at all.
SEND_PAUSE_AFTER_REFUSAL_SECONDS = 30.0
_sends_paused_until: dict[str, float] = {}  # broker URL -> time.monotonic() when sends resume


def send_task(name: str, args: list, **options: Any) -> None:
    """Queue one task that has no Job row, by name: a webhook delivery, whose outbox row stays
    pending for the periodic redelivery when this refuses. One attempt within the broker's
    deadlines; raises BrokerUnavailable when the broker refuses, or refused this process a send
    less than SEND_PAUSE_AFTER_REFUSAL_SECONDS ago."""
    broker = app.conf.broker_url
    if time.monotonic() < _sends_paused_until.get(broker, 0.0):
        raise BrokerUnavailable(f"the task queue at {broker_address()} refused a send moments ago; not retried yet")
    _load_tasks([name])
    try:
        app.signature(name, args=args).apply_async(**{**options, "retry": False})
    except Exception as exc:  # kombu and redis raise several kinds of connection errors and timeouts
        _sends_paused_until[broker] = time.monotonic() + SEND_PAUSE_AFTER_REFUSAL_SECONDS
        raise BrokerUnavailable(
            f"the task queue at {broker_address()} refused the task ({type(exc).__name__}: {exc})"
        ) from None


def _publish(jobs: Sequence[Job]) -> None:
    """Send the jobs' tasks, one message each, over one producer connection: a group of messages
    that any free worker takes one at a time. (Not `celery.group`: that subscribes to every
    member's result in the result backend, which the Job rows make useless, and which would keep
    the web process waiting on a backend it never reads.) If the broker refuses, the jobs are
    failed and announced, and the caller gets BrokerUnavailable."""
    _load_tasks(job.task for job in jobs)
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(queued_at=timezone.now())
    try:
        with app.producer_or_acquire() as producer:
            for job in jobs:
                # By name: a process that never imported the task's module (retry_job) sends it too.
                # Results are ignored: the Job row is the result, so nothing waits on the backend.
                app.signature(
                    job.task, args=[job.pk, *job.arguments], queue=job.queue, task_id=job.celery_id
                ).apply_async(producer=producer, ignore_result=True, retry=False)
    except Exception as exc:  # the broker went away between the check and the commit
        message = f"the task queue at {broker_address()} refused the job ({type(exc).__name__}: {exc})"
        for job in jobs:
            _fail_for_good(job, message)
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
        logger.exception("job %s failed", job_id)  # the traceback, for the worker's log only
        mark_failed(job_id, failure_line(exc))
        raise
    # Only a job still running succeeds: one failed meanwhile as stale keeps its verdict.
    if Job.objects.filter(pk=job_id, status=Job.Status.RUNNING).update(
        status=Job.Status.SUCCEEDED, progress=1.0, result=result, finished_at=timezone.now(), message="done"
    ):
        announce_finished(job_id)
    if parent_id:
        _report_parent(parent_id)
    return result


# An absolute path (not inside a URL): "/srv/data/uploads/3f2a/x.zip" -> "x.zip".
_SERVER_PATH = re.compile(r"(?<![\w:/.~-])(?:/[^\s'\"/:,;()]+)+/([^\s'\"/:,;()]*)")


def failure_line(exc: BaseException) -> str:
    """What a failed job's `error` says: the exception's type and the first line of its message
    (a refusal's one line naming the file, line and field), with server paths cut to their last
    part. Tracebacks go to the worker's log, never to the Job that staff and the API read."""
    lines = str(exc).strip().splitlines()
    return _SERVER_PATH.sub(r"\1", f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": "))


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
    _fail_for_good(job, error)


def _fail_for_good(job: Job, error: str) -> None:
    """Fail `job`; a child takes its parent with it and asks its siblings to stop. One
    transaction, so a retry of the parent (which locks it) sees all of it or none of it: never a
    parent already failed whose children are not yet told to stop, which the retry would reset
    and the late stop request would then cancel."""
    with transaction.atomic():
        if job.parent_id:
            Job.objects.select_for_update().filter(pk=job.parent_id).first()
        if _end(job.pk, Job.Status.FAILED, error) and job.parent_id:
            shard = job.parameters.get("shard", job.pk)
            first_line = error.splitlines()[0] if error else ""
            _end(job.parent_id, Job.Status.FAILED, f"part {shard} failed after {job.attempts} attempts: {first_line}")
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


# How long a retry waits for the parts of a failed job that are still stopping (each stops at
# its next progress report, about once a second) before it refuses.
RETRY_WAIT_SECONDS = 20.0
RETRY_POLL_SECONDS = 0.2


def retry_job(job: Job, *, wait_seconds: float = RETRY_WAIT_SECONDS) -> Job:
    """Run a failed or cancelled job again (staff's retry): a plain job is queued again as it
    was; a parent queues all its children again. Its owner is told (`job_requeued`) so that the
    rows it settled go back to pending. Raises ValueError for a job that cannot be retried.

    A job that has just failed may still have parts running, asked to stop, that delete their
    rows as they stop: the retry waits (up to `wait_seconds`) until none is running, then resets
    every part in one transaction that locks the job, so nothing an old part does afterwards can
    touch the new attempt."""
    deadline = time.monotonic() + wait_seconds
    while True:
        check_retryable(job)
        stopping = _stopping_children(job)
        if not stopping:
            require_broker()
            with transaction.atomic():
                locked = Job.objects.select_for_update().get(pk=job.pk)
                check_retryable(locked)
                if not _stopping_children(locked):
                    _reset_for_retry(locked)
                    break
        elif time.monotonic() > deadline:
            part = stopping[0]
            raise ValueError(
                f"job {job.pk} cannot be retried yet: its part {part.parameters.get('shard', part.pk)} (job {part.pk})"
                f" is still stopping after {wait_seconds:g} s; retry once it has stopped"
            )
        time.sleep(RETRY_POLL_SECONDS)
        job.refresh_from_db()
    job.refresh_from_db()
    return job


def check_retryable(job: Job) -> None:
    """ValueError unless `job` is a failed or cancelled top-level job that records how to run it."""
    if job.status not in ENDED:
        raise ValueError(f"job {job.pk} is {job.status}; only a failed or cancelled job can be retried")
    if job.parent_id:
        raise ValueError(f"job {job.pk} is part of job {job.parent_id}; retry that one")
    if not job.task and not job.children.exists():
        raise ValueError(f"job {job.pk} does not record its task, so it cannot be retried")


def _stopping_children(job: Job) -> list[Job]:
    """Parts of an ended job still running (asked to stop, not yet stopped). One whose worker
    has been silent past the stale limit will never report again: it is ended here."""
    stopping = list(job.children.filter(status=Job.Status.RUNNING).order_by("pk"))
    cutoff = timezone.now() - timedelta(minutes=settings.MARGINALIA_STALE_JOB_MINUTES)
    for child in stopping:
        if child.heartbeat_at is None or child.heartbeat_at < cutoff:
            _end(child.pk, Job.Status.CANCELLED, "stopped: its worker stopped reporting")
    return [child for child in stopping if child.heartbeat_at is not None and child.heartbeat_at >= cutoff]


def _reset_for_retry(job: Job) -> None:
    """Inside retry_job's transaction: the job and all its parts pending again, their tasks sent
    on commit."""
    children = list(job.children.order_by("pk"))
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


def requeue_lost_jobs(older_than: timedelta) -> list[int]:
    """Send again the tasks of pending jobs queued more than `older_than` ago whose message the
    broker no longer holds, neither waiting in a queue nor taken by a worker: a broker restarted
    without its data (or a whole platform restart) loses them, and the job would wait forever.
    A message still held is left alone, however long it waits behind other work. Returns the
    ids re-queued."""
    cutoff = timezone.now() - older_than
    waiting = list(
        Job.objects.filter(status=Job.Status.PENDING, cancel_requested=False, queued_at__lt=cutoff).exclude(task="")
    )
    if not waiting:
        return []
    held = task_ids_held_by_broker()
    if held is None:  # the broker cannot be asked now: the next sweep will
        return []
    lost = [job for job in waiting if job.celery_id not in held]
    for job in lost:
        job.celery_id = str(uuid.uuid4())
        Job.objects.filter(pk=job.pk, status=Job.Status.PENDING).update(
            celery_id=job.celery_id, message="re-queued: its message was lost (the broker restarted?)"
        )
    if lost:
        _publish(lost)
    return [job.pk for job in lost]


_TASK_ID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SCAN_CHUNK = 1000


def task_ids_held_by_broker() -> set[str] | None:
    """The ids of every task message the broker holds: waiting in a queue (each priority's list)
    or delivered to a worker and not yet acknowledged (kombu's unacked hash; with acks_late, the
    running tasks too). None when the broker cannot be reached or is not Redis, whose keys these
    are (then nothing is taken for lost)."""
    try:
        with app.connection_for_write(connect_timeout=settings.MARGINALIA_BROKER_TIMEOUT_SECONDS) as connection:
            channel = connection.default_channel
            client = getattr(channel, "client", None)
            if client is None or not hasattr(channel, "unacked_key"):
                return None
            held: set[str] = set()
            for queue in app.conf.task_queues:
                for priority in channel.priority_steps:
                    key = channel._q_for_pri(queue.name, priority)
                    for start in itertools.count(0, _SCAN_CHUNK):
                        messages = client.lrange(key, start, start + _SCAN_CHUNK - 1)
                        held.update(found.decode() for message in messages for found in _TASK_ID.findall(message))
                        if len(messages) < _SCAN_CHUNK:
                            break
            for _field, message in client.hscan_iter(channel.unacked_key, count=_SCAN_CHUNK):
                held.update(found.decode() for found in _TASK_ID.findall(message))
            return held
    except Exception:  # kombu and redis raise several kinds of connection errors and timeouts
        logger.warning("the stale sweep could not read the broker's queues; lost messages wait for the next sweep")
        return None


def settle_abandoned_parents(older_than: timedelta) -> list[int]:
    """Fail parents still pending or running although none of their parts is, and none reported
    for `older_than`: whatever should have completed them (the last part's owner) never did, so
    staff can retry them. Returns their ids."""
    cutoff = timezone.now() - older_than
    abandoned = (
        Job.objects.filter(status__in=ACTIVE, children__isnull=False)
        .exclude(children__status__in=ACTIVE)
        .filter(Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff))
        .distinct()
        .values_list("pk", flat=True)
    )
    settled = []
    for job_id in abandoned:
        if _end(job_id, Job.Status.FAILED, "its parts ended but nothing completed the job; retry it"):
            settled.append(job_id)
    return settled


def sweep_stale_jobs() -> list[int]:
    """Run every minute by Celery beat (jobs.tasks.sweep_stale_jobs, CELERY_BEAT_SCHEDULE), with
    the configured patience: running jobs whose worker went silent are failed or retried, pending
    jobs whose message was lost are sent again, and parents left with no live part are failed.
    Returns the ids it acted on."""
    patience = timedelta(minutes=settings.MARGINALIA_STALE_JOB_MINUTES)
    return [*fail_stale_jobs(patience), *requeue_lost_jobs(patience), *settle_abandoned_parents(patience)]
