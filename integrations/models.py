"""Recruiting and the outside world: invitations for named annotators, crowd links and their
participants (Prolific / MTurk), and webhooks with their delivery outbox.

This app sits on top: it reads and writes annotation's studies and users, and hears the lower
apps' events (annotation.events, jobs.events) through Django signals; no lower app imports it.
Secrets that grant access (invitation tokens) are stored only as SHA-256 digests; secrets the
platform must still use (webhooks' signing secrets) are stored sealed (outbound.sealing).
"""

from django.conf import settings
from django.db import models

from annotation.models import Study
from outbound.fields import SealedField


class Invitation(models.Model):
    """A one-time link that lets its holder create an annotator account (choosing a username and
    password) granted `studies` (annotation.StudyGrant): it lets them in without narrowing an
    open study to named annotators. Sent by e-mail when `email` is given; otherwise staff pass
    the link on themselves."""

    email = models.EmailField(blank=True)
    only_invited_studies = models.BooleanField(
        default=True, help_text="The account works on the invited studies only (off: on every open study too)."
    )
    token_digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the link's token.")
    studies = models.ManyToManyField(Study, blank=True, related_name="invitations")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    emailed_at = models.DateTimeField(null=True, blank=True)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="invitation"
    )

    class Meta:
        ordering = ["-created_at"]


class CrowdLink(models.Model):
    """A study's public link for a crowd platform. `slug` is the unguessable part of the URL;
    the participant, study and session ids come in the query string (Prolific: PROLIFIC_PID,
    STUDY_ID, SESSION_ID; MTurk: workerId, hitId, assignmentId)."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="crowd_link")
    slug = models.CharField(max_length=40, unique=True)
    completion_code = models.CharField(max_length=64)
    completion_url = models.URLField(
        blank=True, help_text="Where a participant goes when done; {code} is replaced. Empty: Prolific's."
    )
    screened_out_code = models.CharField(max_length=64, blank=True)
    quota = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Most formal items one participant judges (the study's per-annotator cap is separate); empty: none.",
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)


class Participant(models.Model):
    """A crowd worker bound to their platform id and to the session id of their first visit:
    one passwordless account per (link, id), named "Participant-N" (never the platform id),
    that works on the link's study only (a StudyGrant carrying the link's quota, on an account
    scoped to its grants)."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        COMPLETED = "completed"
        SCREENED_OUT = "screened_out"

    link = models.ForeignKey(CrowdLink, on_delete=models.CASCADE, related_name="participants")
    external_id = models.CharField(max_length=64, help_text="PROLIFIC_PID or MTurk workerId.")
    platform_study = models.CharField(max_length=64, blank=True, help_text="STUDY_ID or hitId.")
    session_digest = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the first visit's SESSION_ID or assignmentId."
    )
    address_digest = models.CharField(
        max_length=64, blank=True, help_text="Keyed hash of the client address it came from (entry throttling)."
    )
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="participant")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["link", "external_id"], name="participant_unique_per_link")]
        indexes = [models.Index(fields=["address_digest", "created_at"], name="participant_address_recent")]


class Webhook(models.Model):
    """An outside URL told about events, for one study or (study empty) for all studies and
    jobs. Every request is signed with HMAC-SHA256 under its secret (see services/delivery.py),
    which is shown once, at registration, and kept sealed: `secret_hint` tells hooks apart."""

    url = models.URLField(max_length=500, help_text="Normalised by outbound.targets.parse_url.")
    sealed_secret = SealedField(help_text="The HMAC-SHA256 key, sealed; the receiver verifies with it.")
    secret_hint = models.CharField(max_length=8, blank=True)
    events = models.JSONField(default=list, blank=True, help_text="Event names; empty: every event.")
    study = models.ForeignKey(
        Study, null=True, blank=True, on_delete=models.CASCADE, related_name="webhooks", help_text="Empty: global."
    )
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]


class WebhookDelivery(models.Model):
    """The outbox: one event for one webhook, written in the transaction that caused the event
    and delivered afterwards by a worker, with retries and backoff. `log` keeps every attempt."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.UUIDField(unique=True, help_text="Sent as X-Marginalia-Delivery: receivers dedupe on it.")
    event = models.CharField(max_length=40)
    payload = models.JSONField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(help_text="Not before; also a claim's lease while it is sent.")
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    log = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]
