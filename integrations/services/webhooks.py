"""Webhooks: registering them, pausing them, and the rules both the registration and the
sending follow. Events are written to the outbox by services/outbox.py and sent by
services/delivery.py.

A webhook's URL is read by the one strict parser (outbound.targets: no backslash, userinfo,
control characters, odd ports or hosts; normalised) and its host must pass the outbound guard
(outbound.addresses: public addresses, those in MARGINALIA_OUTBOUND_ALLOW, and with
MARGINALIA_WEBHOOKS_ALLOW_PRIVATE loopback and private networks), at registration and on every
connection. Its secret is generated (or given), shown once in the registration's answer and
stored sealed; only the delivery unseals it, to sign.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.models import Study
from outbound.addresses import OutboundRefused, Policy, UnresolvableHost
from outbound.sealing import hint, seal
from outbound.targets import BadURL, Target, parse_url
from retrieval.errors import InputError

from ..models import Webhook, WebhookDelivery

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
MAX_URL_LENGTH = 500
MAX_SECRET_LENGTH = 128
DEACTIVATED = "webhook deactivated before this delivery was sent"


def webhook_policy() -> Policy:
    """Where webhooks may be sent: the outbound guard's policy, with loopback and private
    networks added when MARGINALIA_WEBHOOKS_ALLOW_PRIVATE is set."""
    return Policy.from_settings(private_networks=settings.MARGINALIA_WEBHOOKS_ALLOW_PRIVATE)


def webhook_target(url: object) -> Target:
    """The URL read by the strict parser, or BadURL: what registration checks and delivery sends to."""
    return parse_url(url, max_length=MAX_URL_LENGTH)


def register_webhook(
    *, url: str, events: list[str] | None = None, study: Study | None = None, secret: str = "", created_by=None
) -> tuple[Webhook, str]:
    """A new active webhook and its secret (generated unless given), which the caller shows
    once: only its sealed form and a hint are stored."""
    unknown = sorted(set(events or []) - set(EVENTS))
    if unknown:
        raise InputError(f"unknown events {unknown}; known: {', '.join(EVENTS)}", field="events")
    if study is not None and set(events or EVENTS) <= set(GLOBAL_EVENTS):
        raise InputError("job events go to global webhooks only (leave the study empty)", field="events")
    if len(secret) > MAX_SECRET_LENGTH or not secret.isprintable():
        raise InputError(f"must be at most {MAX_SECRET_LENGTH} printable characters", field="secret")
    try:
        target = webhook_target(url)
        webhook_policy().addresses(target.host, target.port)
    except (BadURL, OutboundRefused, UnresolvableHost) as exc:
        raise InputError(str(exc), field="url") from None
    secret = secret or secrets.token_hex(32)
    hook = Webhook.objects.create(
        url=target.url,
        events=sorted(set(events or [])),
        study=study,
        sealed_secret=seal(secret),
        secret_hint=hint(secret),
        created_by=created_by,
    )
    return hook, secret


def set_webhook_active(hook: Webhook, active: bool) -> Webhook:
    """Pause or resume a hook. Pausing stops what is queued for it: its pending deliveries end
    failed, saying so, and no new ones are written while it is paused."""
    with transaction.atomic():
        hook.active = active
        hook.save(update_fields=["active"])
        if not active:
            WebhookDelivery.objects.filter(webhook=hook, status=WebhookDelivery.Status.PENDING).update(
                status=WebhookDelivery.Status.FAILED, last_error=DEACTIVATED, next_attempt_at=timezone.now()
            )
    return hook


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=` + hex HMAC-SHA256 of `timestamp.body` under `secret`."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"
