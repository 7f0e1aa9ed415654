"""Inviting named annotators: staff issue a one-time link (sent by e-mail when an address is
given); its holder chooses a username and password, becomes an annotator of the invited
studies and is signed in. Also the per-study recruiting settings: named annotators and the
per-annotator cap the queue enforces (annotation.services.queue.reached_cap)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from annotation.models import Study
from retrieval.errors import InputError

from ..models import Invitation
from .tokens import digest, new_token


@dataclass(frozen=True)
class IssuedInvitation:
    """An invitation with its token: the only moment the link can be shown."""

    invitation: Invitation
    token: str

    @property
    def path(self) -> str:
        return reverse("invitation_accept", args=[self.token])

    def url(self, base_url: str | None = None) -> str:
        return (base_url or settings.MARGINALIA_BASE_URL).rstrip("/") + self.path


def invite_annotator(
    *, studies: list[Study], email: str = "", created_by=None, send: bool = True, base_url: str | None = None
) -> IssuedInvitation:
    """A new one-time invitation to `studies` (may be empty: an account with no study yet),
    e-mailed to `email` when one is given and `send` is true."""
    email = (email or "").strip()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise InputError(f"not an e-mail address: {email!r}", field="email") from None
        if get_user_model().objects.filter(email__iexact=email).exists():
            raise InputError(f"{email} already has an account: add it to the study's annotators instead", field="email")
    token = new_token()
    with transaction.atomic():
        invitation = Invitation.objects.create(
            email=email,
            token_digest=digest(token),
            created_by=created_by,
            expires_at=timezone.now() + timedelta(days=settings.MARGINALIA_INVITATION_DAYS),
        )
        invitation.studies.set(studies)
    issued = IssuedInvitation(invitation, token)
    if email and send:
        _send(issued, base_url)
    return issued


def _send(issued: IssuedInvitation, base_url: str | None) -> None:
    invitation = issued.invitation
    names = ", ".join(study.name for study in invitation.studies.order_by("name")) or "Marginalia"
    send_mail(
        subject=f"Invitation to annotate: {names}",
        message=(
            f"You are invited to annotate for {names}.\n\n"
            f"Open this link to choose a username and password (it works once, until "
            f"{invitation.expires_at:%Y-%m-%d %H:%M} UTC):\n{issued.url(base_url)}\n"
        ),
        from_email=None,
        recipient_list=[invitation.email],
    )
    invitation.emailed_at = timezone.now()
    invitation.save(update_fields=["emailed_at"])


def open_invitation(token: str) -> Invitation | None:
    """The invitation this token opens, if it is still unused and unexpired."""
    return Invitation.objects.filter(
        token_digest=digest(token), accepted_at__isnull=True, expires_at__gt=timezone.now()
    ).first()


def accept_invitation(token: str, *, username: str, password: str):
    """Create the invited annotator's account and put it on the invited studies. The token works
    once: a second acceptance (two tabs, a replayed link) is refused under the row's lock."""
    with transaction.atomic():
        invitation = Invitation.objects.select_for_update().filter(token_digest=digest(token)).first()
        if invitation is None or invitation.accepted_at is not None or invitation.expires_at <= timezone.now():
            raise InputError("this invitation link has been used or has expired", field="token")
        if get_user_model().objects.filter(username__iexact=username).exists():
            raise InputError(f"the username {username!r} is taken", field="username")
        user = get_user_model().objects.create_user(username=username, email=invitation.email, password=password)
        for study in invitation.studies.all():
            study.annotators.add(user)
        invitation.accepted_at, invitation.accepted_by = timezone.now(), user
        invitation.save(update_fields=["accepted_at", "accepted_by"])
    return user


def set_recruiting(study: Study, *, annotators=None, max_items_per_annotator=...) -> Study:
    """Change who may work on a study (None: leave as is; empty: everyone) and its per-annotator
    cap (None: no cap; left out: unchanged)."""
    if max_items_per_annotator is not ...:
        if max_items_per_annotator is not None and max_items_per_annotator < 1:
            raise InputError("must be at least 1, or empty for no cap", field="max_items_per_annotator")
        study.max_items_per_annotator = max_items_per_annotator
        study.save(update_fields=["max_items_per_annotator"])
    if annotators is not None:
        study.annotators.set(annotators)
    return study
