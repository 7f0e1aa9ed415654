"""Sending the webhook outbox: one attempt at a delivery, and a batch of every due one (what the
worker's task, the periodic redelivery and `send_webhooks` run).

A request: POST through the outbound guard (outbound.http: the host's every address checked,
the connection made to a checked one, no redirect followed), JSON body `{"id", "event",
"created_at", "data"}`, headers `X-Marginalia-Event`, `X-Marginalia-Delivery` (the id: delivery
is at least once, receivers dedupe on it), `X-Marginalia-Timestamp` (Unix seconds) and
`X-Marginalia-Signature: sha256=HEX`, HEX being HMAC-SHA256 under the hook's secret of
`TIMESTAMP + "." + body`. A 2xx answer delivers it; anything else (or no answer within the
timeout) is retried after BACKOFF x 2^(attempt-1) seconds (capped), up to MAX_ATTEMPTS, then
the delivery is failed. A URL the strict parser refuses or an address the guard refuses fails
the delivery at once (never retried). Whatever goes wrong with one delivery is recorded on it
as one line and the batch goes on: one bad hook never holds up the others.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import timedelta

import httpx2
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from outbound.addresses import OutboundRefused
from outbound.http import guarded_client
from outbound.sealing import SealBroken, unseal
from outbound.targets import BadURL

from ..models import WebhookDelivery
from .webhooks import signature, webhook_policy, webhook_target

logger = logging.getLogger(__name__)

LOG_LENGTH = 20


class Refused(Exception):
    """This delivery can never be sent as it stands (its URL or address is refused): fail it."""


def backoff_seconds(attempts: int) -> float:
    """Wait before attempt `attempts + 1`: BACKOFF x 2^(attempts-1), capped."""
    return min(
        settings.MARGINALIA_WEBHOOK_BACKOFF_SECONDS * 2 ** max(attempts - 1, 0),
        settings.MARGINALIA_WEBHOOK_BACKOFF_MAX_SECONDS,
    )


@dataclass(frozen=True)
class Attempt:
    delivery_id: int
    status: str  # the delivery's status after the attempt
    retry_in: float | None  # seconds until the next attempt, when one is due


def deliver(delivery_id: int, *, force: bool = False) -> Attempt | None:
    """Make one attempt at a due pending delivery of an active hook (`force`: due or not);
    None when it is not ours to send (delivered, failed, not due, paused, or another worker
    holds its lease). Never raises for what happens while sending: the attempt records it."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.MARGINALIA_WEBHOOK_TIMEOUT_SECONDS + 30)
    due = Q() if force else Q(next_attempt_at__lte=now)
    claimed = WebhookDelivery.objects.filter(
        due, pk=delivery_id, status=WebhookDelivery.Status.PENDING, webhook__active=True
    ).update(next_attempt_at=lease)
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    try:
        status_code, error = _post(delivery)
    except Refused as refusal:
        return _record(delivery, status_code=None, error=str(refusal), final=True)
    except Exception as exc:  # whatever it is, it is this delivery's to record, not the batch's to stop on
        logger.exception("webhook delivery %s: unexpected error", delivery.pk)
        status_code, error = None, one_line(exc)
    if status_code is not None and 200 <= status_code < 300:
        return _record(delivery, status_code=status_code, error="", delivered=True)
    return _record(delivery, status_code=status_code, error=error)


def one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300]


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """POST the signed event; (status code or None, error text), or Refused."""
    try:
        target = webhook_target(delivery.webhook.url)
    except BadURL as exc:
        raise Refused(f"url refused: {exc}") from None
    try:
        secret = unseal(delivery.webhook.sealed_secret)
    except SealBroken as exc:
        return None, str(exc)
    body = json.dumps(
        {
            "id": str(delivery.delivery_id),
            "event": delivery.event,
            "created_at": delivery.created_at.isoformat(),
            "data": delivery.payload,
        },
        sort_keys=True,
    ).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Marginalia-Webhooks/1",
        "X-Marginalia-Event": delivery.event,
        "X-Marginalia-Delivery": str(delivery.delivery_id),
        "X-Marginalia-Timestamp": timestamp,
        "X-Marginalia-Signature": signature(secret, timestamp, body),
    }
    timeout = settings.MARGINALIA_WEBHOOK_TIMEOUT_SECONDS
    try:
        with (
            guarded_client(webhook_policy(), timeout=timeout) as client,
            client.stream("POST", target.url, content=body, headers=headers) as response,
        ):
            code = response.status_code
    except OutboundRefused as exc:
        raise Refused(str(exc)) from None
    except httpx2.TimeoutException:
        return None, f"no answer within {timeout:g} s"
    except httpx2.TransportError as exc:
        return None, one_line(exc)
    if 300 <= code < 400:
        return code, f"HTTP {code} (redirects are not followed)"
    return code, "" if 200 <= code < 300 else f"HTTP {code}"


def _record(
    delivery: WebhookDelivery, *, status_code: int | None, error: str, delivered: bool = False, final: bool = False
) -> Attempt:
    now = timezone.now()
    attempts = delivery.attempts + 1
    entry = {"at": now.isoformat(), "status_code": status_code, "error": error}
    fields = {
        "attempts": attempts,
        "last_status_code": status_code,
        "last_error": error,
        "log": [*delivery.log, entry][-LOG_LENGTH:],
    }
    retry_in = None
    if delivered:
        fields.update(status=WebhookDelivery.Status.DELIVERED, delivered_at=now)
    elif final or attempts >= settings.MARGINALIA_WEBHOOK_MAX_ATTEMPTS:
        fields.update(status=WebhookDelivery.Status.FAILED)
    else:
        retry_in = backoff_seconds(attempts)
        fields.update(next_attempt_at=now + timedelta(seconds=retry_in))
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields)
    if not delivered:
        logger.warning("webhook delivery %s attempt %s: %s", delivery.pk, attempts, error or status_code)
    return Attempt(delivery.pk, fields.get("status", WebhookDelivery.Status.PENDING), retry_in)


def deliver_due(*, force: bool = False, limit: int = 500) -> dict:
    """One attempt at each pending delivery of an active hook that is due (`force`: every
    pending one), oldest first. Returns counts by outcome and how many stay pending."""
    pending = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, webhook__active=True)
    if not force:
        pending = pending.filter(next_attempt_at__lte=timezone.now())
    counts = {"attempted": 0, "delivered": 0, "failed": 0, "retrying": 0}
    for delivery_id in pending.order_by("pk").values_list("pk", flat=True)[:limit]:
        attempt = deliver(delivery_id, force=force)
        if attempt is None:
            continue
        counts["attempted"] += 1
        key = {"delivered": "delivered", "failed": "failed"}.get(attempt.status, "retrying")
        counts[key] += 1
    counts["pending"] = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).count()
    return counts
