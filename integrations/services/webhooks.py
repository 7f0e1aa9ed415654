"""Webhooks: registering them, the outbox, signing and delivering.

Events (`EVENTS`) come from the lower apps' signals (integrations/receivers.py). For each
active webhook that wants an event (global hooks: every study and every job; study hooks: their
study's events) a WebhookDelivery row is written in the transaction that caused the event, so a
rolled-back submission announces nothing and a committed one loses nothing; once it commits the
rows are handed to a Celery worker (never delivered inside the request, so a slow or dead
receiver never holds up a submission). A periodic task and `send_webhooks` pick up whatever is
due, e.g. after the broker or the receiver was down.

A request: POST, JSON body `{"id", "event", "created_at", "data"}`, headers `X-Marginalia-Event`,
`X-Marginalia-Delivery` (the id: delivery is at least once, receivers dedupe on it),
`X-Marginalia-Timestamp` (Unix seconds) and `X-Marginalia-Signature: sha256=HEX`, HEX being
HMAC-SHA256 under the hook's secret of `TIMESTAMP + "." + body`. A 2xx answer delivers it;
anything else (or no answer within the timeout; redirects are not followed) is retried after
BACKOFF x 2^(attempt-1) seconds (capped), up to MAX_ATTEMPTS, then the delivery is failed.
Hosts that resolve to private, loopback, link-local or otherwise non-global addresses are refused
at registration and again before every attempt (failed at once, never retried) unless
MARGINALIA_WEBHOOKS_ALLOW_PRIVATE is set.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from annotation.models import Study
from retrieval.errors import InputError

from ..models import Webhook, WebhookDelivery

logger = logging.getLogger(__name__)

EVENTS = (
    "judgment.submitted",
    "item.complete",
    "study.complete",
    "annotator.flagged",
    "study.agreement_low",
    "annotator.agreement_low",
    "job.finished",
    "job.failed",
)
# Events that belong to no study: only global hooks hear them.
GLOBAL_EVENTS = ("job.finished", "job.failed")
LOG_LENGTH = 20


def refused_address(url: str) -> str | None:
    """Why `url` may not receive webhooks, or None: not http(s), no host, or (unless the setting
    allows it) a host resolving to an address that is not globally routable."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL with a host"
    if settings.MARGINALIA_WEBHOOKS_ALLOW_PRIVATE:
        return None
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(parts.hostname, parts.port or 443)}
    except (socket.gaierror, UnicodeError):
        return f"cannot resolve {parts.hostname}"
    for address in sorted(addresses):
        ip = ipaddress.ip_address(address.split("%")[0])
        if not ip.is_global or ip.is_multicast:
            return f"{parts.hostname} resolves to a private or local address ({ip}); such addresses are refused"
    return None


def register_webhook(
    *, url: str, events: list[str] | None = None, study: Study | None = None, secret: str = "", created_by=None
) -> Webhook:
    """A new active webhook; a secret is generated unless one is given."""
    unknown = sorted(set(events or []) - set(EVENTS))
    if unknown:
        raise InputError(f"unknown events {unknown}; known: {', '.join(EVENTS)}", field="events")
    if study is not None and set(events or EVENTS) <= set(GLOBAL_EVENTS):
        raise InputError("job events go to global webhooks only (leave the study empty)", field="events")
    refusal = refused_address(url)
    if refusal:
        raise InputError(refusal, field="url")
    return Webhook.objects.create(
        url=url,
        events=sorted(set(events or [])),
        study=study,
        secret=secret or secrets.token_hex(32),
        created_by=created_by,
    )


def enqueue(event: str, payload: dict, *, study_id: int | None = None) -> list[int]:
    """Write the outbox rows of `event` for every webhook that wants it, in the caller's
    transaction. Returns the delivery ids (integrations.receivers queues them after commit)."""
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


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=` + hex HMAC-SHA256 of `timestamp.body` under `secret`."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


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
    """Make one attempt at a due pending delivery (`force`: due or not); None when it is not
    ours to send (delivered, failed, not due, or another worker holds its lease)."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.MARGINALIA_WEBHOOK_TIMEOUT_SECONDS + 30)
    due = Q() if force else Q(next_attempt_at__lte=now)
    claimed = WebhookDelivery.objects.filter(due, pk=delivery_id, status=WebhookDelivery.Status.PENDING).update(
        next_attempt_at=lease
    )
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    refusal = refused_address(delivery.webhook.url)
    if refusal:
        return _record(delivery, status_code=None, error=refusal, final=True)
    status_code, error = _post(delivery)
    if status_code is not None and 200 <= status_code < 300:
        return _record(delivery, status_code=status_code, error="", delivered=True)
    return _record(delivery, status_code=status_code, error=error)


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """POST the signed event; (status code or None, error text)."""
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
    request = urllib.request.Request(
        delivery.webhook.url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "Marginalia-Webhooks/1",
            "X-Marginalia-Event": delivery.event,
            "X-Marginalia-Delivery": str(delivery.delivery_id),
            "X-Marginalia-Timestamp": timestamp,
            "X-Marginalia-Signature": signature(delivery.webhook.secret, timestamp, body),
        },
    )
    try:
        with _OPENER.open(request, timeout=settings.MARGINALIA_WEBHOOK_TIMEOUT_SECONDS) as response:
            return response.status, ""
    except urllib.error.HTTPError as error:
        return error.code, f"HTTP {error.code}"
    except (urllib.error.URLError, OSError, ValueError) as error:
        return None, f"{type(error).__name__}: {getattr(error, 'reason', error)}"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not an instruction: following it could reach a private address."""

    def redirect_request(self, *args, **kwargs):
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


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
    """One attempt at each pending delivery that is due (`force`: every pending one), oldest
    first. Returns counts by outcome and how many stay pending."""
    pending = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING)
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
