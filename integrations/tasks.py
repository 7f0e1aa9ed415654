"""Celery tasks that deliver webhooks: one delivery right after its event commits (retried
with backoff by re-queuing itself), and the periodic sweep (CELERY_BEAT_SCHEDULE) that sends
whatever is due, e.g. after the broker or the receiver was down."""

import logging

from celery import shared_task

from jobs.services import send_task

from .services.delivery import deliver, deliver_due

logger = logging.getLogger(__name__)


@shared_task(name="integrations.tasks.deliver_webhook", ignore_result=True)
def deliver_webhook(delivery_id: int) -> None:
    attempt = deliver(delivery_id)
    if attempt is not None and attempt.retry_in is not None:
        deliver_webhook.apply_async(args=[delivery_id], countdown=attempt.retry_in)


@shared_task(name="integrations.tasks.redeliver_webhooks", ignore_result=True)
def redeliver_webhooks() -> dict:
    return deliver_due()


def queue_deliveries(delivery_ids: list[int]) -> None:
    """Hand committed outbox rows to a worker. A broker that is down costs nothing but time:
    the rows stay pending and the periodic redelivery sends them."""
    for delivery_id in delivery_ids:
        try:
            send_task(deliver_webhook.name, [delivery_id], retry=False)
        except Exception:
            logger.warning("webhook delivery %s not queued (broker unavailable); it waits for redelivery", delivery_id)
