"""The webhook outbox's writing side: an event becomes one WebhookDelivery row per active hook
that wants it, in the transaction that caused the event, so a rolled-back submission announces
nothing and a committed one loses nothing. Apart from registration (services/webhooks.py) and
sending (services/delivery.py), because every process imports it at start through the signal
receivers (integrations/receivers.py) and needs neither the sealing nor the HTTP client."""

from __future__ import annotations

import uuid

from django.db.models import Q
from django.utils import timezone

from ..models import Webhook, WebhookDelivery


def enqueue(event: str, payload: dict, *, study_id: int | None = None) -> list[int]:
    """Write the outbox rows of `event` for every webhook that wants it, in the caller's
    transaction (global hooks hear every study and every job; study hooks their study's
    events). Returns the delivery ids (integrations.receivers queues them after commit)."""
    hooks = Webhook.objects.filter(active=True)
    if study_id is None:
        hooks = hooks.filter(study__isnull=True)
    else:
        hooks = hooks.filter(Q(study__isnull=True) | Q(study_id=study_id))
    now = timezone.now()
    return [
        WebhookDelivery.objects.create(
            webhook=hook, delivery_id=uuid.uuid4(), event=event, payload=payload, next_attempt_at=now
        ).pk
        for hook in hooks
        if not hook.events or event in hook.events
    ]
