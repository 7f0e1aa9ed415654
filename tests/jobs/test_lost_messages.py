"""Jobs never wait forever for a message the broker lost, and a retry never races the clean-up of
the failure it retries.

- The sweep sends again the task of a pending job queued longer than the stale limit whose
  message the broker holds neither in a queue nor as taken by a worker (a restart of Redis
  without its data, or of the whole platform, loses them); a message still held is left alone.
- The sweep fails a parent none of whose parts is pending or running, silent past the limit, so
  `retry_job` works on it (before, it stayed `running` and retry refused "job is running").
- A part failing for good fails its parent and stops its siblings in one transaction: a retry in
  between used to be cancelled by the late stop request ("cancelled", nothing re-run).
- A retry waits for parts still stopping after the failure, and refuses with one line if they
  do not stop in time."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobs import services
from jobs.models import Job
from jobs.services import (
    dispatch_children,
    mark_failed,
    requeue_lost_jobs,
    retry_job,
    settle_abandoned_parents,
    task_ids_held_by_broker,
)
from jobs.signals import job_ended
from marginalia.celery import app
from retrieval.tasks import run_bm25

pytestmark = pytest.mark.django_db

TASK = "retrieval.tasks.run_bm25"
LONG_AGO = timezone.now() - timedelta(hours=1)
PATIENCE = timedelta(minutes=30)


def queued_job(parts: int, django_capture_on_commit_callbacks) -> Job:
    """A job with `parts` children whose messages were sent to the broker, as a sharded run's are."""
    with django_capture_on_commit_callbacks(execute=True):
        parent = Job.objects.create(kind="retrieve", status=Job.Status.RUNNING, heartbeat_at=timezone.now())
        dispatch_children(parent, run_bm25, [[0, []] for _ in range(parts)], max_attempts=3)
    return parent


def messages_in(broker, queue: str = "cpu") -> list[bytes]:
    return broker.lrange(queue, 0, -1)


def test_the_sweep_sends_again_the_shards_whose_messages_the_broker_lost(broker, django_capture_on_commit_callbacks):
    job = queued_job(3, django_capture_on_commit_callbacks)
    lost, waiting, taken = job.children.order_by("pk")
    with app.connection_for_write() as consumer:
        # A worker took all three (unacknowledged, as with acks_late) and still runs `taken`;
        # `waiting` went back to the queue; `lost` vanished, as messages do when Redis restarts.
        queue = app.conf.task_queues[0](consumer.default_channel)
        for message in [queue.get(no_ack=False) for _ in range(3)]:
            if message.headers["id"] == waiting.celery_id:
                message.requeue()
            elif message.headers["id"] == lost.celery_id:
                message.reject()
        Job.objects.filter(parent=job).update(queued_at=LONG_AGO)

        requeued = requeue_lost_jobs(PATIENCE)

        assert requeued == [lost.pk]
        lost.refresh_from_db()
        assert lost.status == Job.Status.PENDING and "message was lost" in lost.message
        assert lost.queued_at > LONG_AGO
        ids_in_queue = {id_ for message in messages_in(broker) for id_ in services._TASK_ID.findall(message)}
        assert lost.celery_id.encode() in ids_in_queue and waiting.celery_id.encode() in ids_in_queue
        assert taken.celery_id in task_ids_held_by_broker()
        assert Job.objects.get(pk=taken.pk).celery_id == taken.celery_id
        assert requeue_lost_jobs(PATIENCE) == []  # sent again just now: not lost, not old


def test_a_pending_job_queued_recently_or_with_its_message_waiting_is_left_alone(
    broker, django_capture_on_commit_callbacks
):
    job = queued_job(2, django_capture_on_commit_callbacks)
    broker.flushdb()  # every message lost, but they were queued a moment ago

    assert requeue_lost_jobs(PATIENCE) == []

    Job.objects.filter(parent=job).update(queued_at=LONG_AGO)
    assert sorted(requeue_lost_jobs(PATIENCE)) == sorted(job.children.values_list("pk", flat=True))
    assert len(messages_in(broker)) == 2
    assert requeue_lost_jobs(PATIENCE) == []


def test_the_sweep_leaves_lost_messages_for_later_when_the_broker_cannot_be_asked(broker_down):
    job = Job.objects.create(kind="upload", task="console.tasks.process_upload", queued_at=LONG_AGO, celery_id="x")

    assert requeue_lost_jobs(PATIENCE) == []
    job.refresh_from_db()
    assert (job.status, job.celery_id) == (Job.Status.PENDING, "x")


def test_a_parent_left_with_no_live_part_is_failed_and_can_then_be_retried(broker):
    parent = Job.objects.create(kind="retrieve", status=Job.Status.RUNNING, heartbeat_at=LONG_AGO)
    for status in (Job.Status.SUCCEEDED, Job.Status.CANCELLED):
        Job.objects.create(kind="retrieve-shard", parent=parent, status=status, task=TASK, arguments=[0, []])
    busy = Job.objects.create(kind="retrieve", status=Job.Status.RUNNING, heartbeat_at=LONG_AGO)
    Job.objects.create(kind="retrieve-shard", parent=busy, status=Job.Status.PENDING, task=TASK)

    assert settle_abandoned_parents(PATIENCE) == [parent.pk]

    parent.refresh_from_db()
    assert parent.status == Job.Status.FAILED and "retry it" in parent.error
    assert Job.objects.get(pk=busy.pk).status == Job.Status.RUNNING
    retried = retry_job(parent)
    assert retried.status == Job.Status.PENDING
    assert set(retried.children.values_list("status", flat=True)) == {Job.Status.PENDING}


def test_the_beat_task_runs_all_three_settlements(broker, settings):
    settings.MARGINALIA_STALE_JOB_MINUTES = 30
    silent = Job.objects.create(kind="train", status=Job.Status.RUNNING, heartbeat_at=LONG_AGO, task="t")
    lost = Job.objects.create(kind="upload", task="console.tasks.process_upload", queued_at=LONG_AGO, celery_id="y")
    orphan = Job.objects.create(kind="retrieve", status=Job.Status.RUNNING, heartbeat_at=LONG_AGO)
    Job.objects.create(kind="retrieve-shard", parent=orphan, status=Job.Status.SUCCEEDED, task=TASK)

    from jobs.tasks import sweep_stale_jobs

    assert sorted(sweep_stale_jobs()) == sorted([silent.pk, lost.pk, orphan.pk])
    assert Job.objects.get(pk=silent.pk).status == Job.Status.FAILED
    assert Job.objects.get(pk=lost.pk).celery_id != "y" and len(messages_in(broker)) == 1
    assert Job.objects.get(pk=orphan.pk).status == Job.Status.FAILED


# --- retry against the clean-up it races ------------------------------------------------------------


def sharded_job(*statuses: str) -> tuple[Job, list[Job]]:
    """A running parent with one part per status (running parts have just reported)."""
    parent = Job.objects.create(kind="retrieve", status=Job.Status.RUNNING, heartbeat_at=timezone.now())
    parts = [
        Job.objects.create(
            kind="retrieve-shard",
            parent=parent,
            status=status,
            heartbeat_at=timezone.now() if status == Job.Status.RUNNING else None,
            task=TASK,
            arguments=[0, []],
            attempts=int(status == Job.Status.RUNNING),
            max_attempts=1,
            parameters={"shard": number + 1},
        )
        for number, status in enumerate(statuses or (Job.Status.RUNNING, Job.Status.RUNNING))
    ]
    return parent, parts


def in_thread(target) -> tuple[threading.Thread, dict]:
    outcome = {}

    def run():
        try:
            outcome["value"] = target()
        except Exception as exc:  # the assertion reads what the thread raised
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@pytest.mark.django_db(transaction=True)
def test_a_retry_while_a_part_fails_for_good_is_never_cancelled_by_the_late_stop_request(broker):
    """Staff retry at the moment the parent has been failed: before the fix the retry reset the
    job, then the failing part's stop request cancelled everything it had just queued."""
    parent, (failing, _waiting) = sharded_job(Job.Status.RUNNING, Job.Status.PENDING)
    retried = threading.Event()
    outcomes = []

    def retry_when_the_parent_fails(sender, job_id, status, **kwargs):
        if job_id == parent.pk and not retried.is_set():
            retried.set()
            thread, outcome = in_thread(lambda: retry_job(Job.objects.get(pk=parent.pk), wait_seconds=3))
            outcomes.append(outcome)
            thread.join(0.5)  # the retry gets its chance inside the window, if there is one
            outcomes.append(thread)

    job_ended.connect(retry_when_the_parent_fails)
    try:
        mark_failed(failing.pk, "RuntimeError: boom")
        outcome, thread = outcomes
        thread.join(10)
    finally:
        job_ended.disconnect(retry_when_the_parent_fails)

    parent.refresh_from_db()
    statuses = set(parent.children.values_list("status", flat=True))
    if "error" in outcome:  # refused: the failure was not visible yet; nothing was reset
        assert "is running" in str(outcome["error"])
        assert parent.status == Job.Status.FAILED
    else:  # it waited for the failure to be complete, then queued everything again
        assert parent.status == Job.Status.PENDING and statuses == {Job.Status.PENDING}


@pytest.mark.django_db(transaction=True)
def test_a_retry_waits_for_the_parts_still_stopping_then_queues_them_all(broker):
    parent, (failed_part, stopping) = sharded_job()
    mark_failed(failed_part.pk, "RuntimeError: boom")
    assert Job.objects.get(pk=stopping.pk).cancel_requested
    thread, outcome = in_thread(lambda: retry_job(Job.objects.get(pk=parent.pk)))
    time.sleep(0.6)
    assert thread.is_alive() and Job.objects.get(pk=parent.pk).status == Job.Status.FAILED

    services._end(stopping.pk, Job.Status.CANCELLED)  # its worker reaches its next progress report
    thread.join(10)

    assert outcome.get("value") is not None, outcome
    parent.refresh_from_db()
    assert parent.status == Job.Status.PENDING
    assert (
        list(parent.children.values_list("status", "cancel_requested", "attempts"))
        == [(Job.Status.PENDING, False, 0)] * 2
    )
    assert len(messages_in(broker)) == 2


def test_a_retry_refuses_with_one_line_when_a_part_does_not_stop_in_time(broker):
    parent, (failed_part, _stopping) = sharded_job()
    mark_failed(failed_part.pk, "RuntimeError: boom")

    with pytest.raises(
        ValueError, match=r"part 2 \(job \d+\) is still stopping after 0.5 s; retry once it has stopped"
    ):
        retry_job(Job.objects.get(pk=parent.pk), wait_seconds=0.5)

    assert Job.objects.get(pk=parent.pk).status == Job.Status.FAILED
    assert messages_in(broker) == []


def test_a_retry_ends_a_stopping_part_whose_worker_went_silent(broker, settings):
    parent, (failed_part, silent) = sharded_job()
    mark_failed(failed_part.pk, "RuntimeError: boom")
    Job.objects.filter(pk=silent.pk).update(heartbeat_at=LONG_AGO)

    retried = retry_job(Job.objects.get(pk=parent.pk), wait_seconds=0.5)

    assert retried.status == Job.Status.PENDING
    assert set(retried.children.values_list("status", flat=True)) == {Job.Status.PENDING}
