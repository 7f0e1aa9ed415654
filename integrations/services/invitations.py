"""Inviting named annotators: staff issue a one-time link (sent by e-mail when an address is
given); its holder chooses a username and password and gets an account granted the invited
studies (annotation.StudyGrant), then is signed in. An invitation grants access: it never names
the account on a study's annotator list, so an open study stays open to everyone else. The
account works on the invited studies only unless the invitation (or staff, later) widens it to
every open study."""

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

from annotation.models import AnnotatorProfile, Study, StudyGrant
from marginalia.public_address import public_address
from retrieval.errors import InputError

from ..models import Invitation
from .crowd import PARTICIPANT_NAME
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
        """The link on the platform's public address (marginalia.public_address) unless
        `base_url` is given."""
        return (base_url or public_address()).rstrip("/") + self.path


def invite_annotator(
    *,
    studies: list[Study],
    email: str = "",
    created_by=None,
    send: bool = True,
    base_url: str | None = None,
    only_invited_studies: bool = True,
) -> IssuedInvitation:
    """A new one-time invitation to `studies` (may be empty: an account with no study yet),
    e-mailed to `email` when one is given and `send` is true. The account it makes works on
    these studies only unless `only_invited_studies` is off."""
    email = (email or "").strip()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise InputError(f"not an e-mail address: {email!r}", field="email") from None
        if get_user_model().objects.filter(email__iexact=email).exists():
            raise InputError(
                f"{email} already has an account: give it access on the study's recruiting page instead", field="email"
            )
    token = new_token()
    with transaction.atomic():
        invitation = Invitation.objects.create(
            email=email,
            token_digest=digest(token),
            only_invited_studies=only_invited_studies,
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
    """Create the invited annotator's account, granted the invited studies (and scoped to them
    unless the invitation says otherwise). The token works once: a second acceptance (two tabs,
    a replayed link) is refused under the row's lock."""
    if PARTICIPANT_NAME.match(username):
        raise InputError("usernames that start with 'participant-' are kept for crowd participants", field="username")
    with transaction.atomic():
        invitation = Invitation.objects.select_for_update().filter(token_digest=digest(token)).first()
        if invitation is None or invitation.accepted_at is not None or invitation.expires_at <= timezone.now():
            raise InputError("this invitation link has been used or has expired", field="token")
        if get_user_model().objects.filter(username__iexact=username).exists():
            raise InputError(f"the username {username!r} is taken", field="username")
        user = get_user_model().objects.create_user(username=username, email=invitation.email, password=password)
        AnnotatorProfile.objects.create(user=user, only_granted=invitation.only_invited_studies)
        StudyGrant.objects.bulk_create([StudyGrant(study=study, annotator=user) for study in invitation.studies.all()])
        invitation.accepted_at, invitation.accepted_by = timezone.now(), user
        invitation.save(update_fields=["accepted_at", "accepted_by"])
    return user
