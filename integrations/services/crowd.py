"""Crowd participants, the way Prolific recruits (MTurk's names work too):

    /crowd/<slug>/?PROLIFIC_PID=<participant>&STUDY_ID=<platform study>&SESSION_ID=<session>
    /crowd/<slug>/?workerId=<participant>&hitId=<HIT>&assignmentId=<assignment>      (MTurk)

The first visit creates a passwordless account bound to that participant id and to the link's
study alone (AnnotatorProfile.only_study); a later visit with the same id and session resumes it.
The same id arriving with another session is refused, so knowing someone's id does not open
their work. Each participant judges at most the study's `max_items_per_annotator` items (the
quota); once done they get the link's completion code and are sent to the completion URL.
Blocked or screened-out participants get a page saying so (and the screen-out code if set).
"""

from __future__ import annotations

import re
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from annotation.hot_queries import claimable_item_ids
from annotation.models import AnnotatorProfile, Assignment, Study
from annotation.services import annotator_refusal
from annotation.services.quality import block_annotator
from annotation.services.queue import reached_cap
from retrieval.errors import InputError

from ..models import CrowdLink, Participant

PROLIFIC_COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"
# Query-string names of each id: Prolific's first, then MTurk's.
ID_PARAMETERS = {
    "external_id": ("PROLIFIC_PID", "workerId"),
    "platform_study": ("STUDY_ID", "hitId"),
    "session": ("SESSION_ID", "assignmentId"),
}
# MTurk shows a HIT's page in preview with this assignmentId before a worker accepts it.
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
ID_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


class CrowdRefusal(Exception):
    """Why a participant may not (or may no longer) work, said plainly; `code` is the screen-out
    code to hand back to the platform, when the link has one."""

    def __init__(self, message: str, *, code: str = ""):
        super().__init__(message)
        self.code = code


def configure_crowd_link(
    study: Study,
    *,
    completion_code: str | None = None,
    completion_url: str | None = None,
    screened_out_code: str | None = None,
    quota=...,
    active: bool | None = None,
) -> CrowdLink:
    """The study's crowd link, made on first use (with a random completion code unless one is
    given); the arguments given change it. `quota` sets the study's per-participant cap."""
    link = CrowdLink.objects.filter(study=study).first() or CrowdLink(
        study=study, slug=secrets.token_urlsafe(16), completion_code=secrets.token_hex(4).upper()
    )
    for field, value in (
        ("completion_code", completion_code),
        ("completion_url", completion_url),
        ("screened_out_code", screened_out_code),
        ("active", active),
    ):
        if value is not None:
            setattr(link, field, value.strip() if isinstance(value, str) else value)
    if not link.completion_code:
        raise InputError("a completion code is required", field="completion_code")
    if link.completion_url and not link.completion_url.startswith(("https://", "http://")):
        raise InputError("must be an http(s) URL", field="completion_url")
    with transaction.atomic():
        link.save()
        if quota is not ...:
            if quota is not None and quota < 1:
                raise InputError("must be at least 1, or empty for no quota", field="quota")
            Study.objects.filter(pk=study.pk).update(max_items_per_annotator=quota)
    return link


def study_url(link: CrowdLink, base_url: str | None = None) -> str:
    """The URL to paste into Prolific, with its placeholders for the three ids."""
    base = (base_url or settings.MARGINALIA_BASE_URL).rstrip("/")
    return (
        f"{base}{reverse('crowd_entry', args=[link.slug])}"
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )


def completion_url(link: CrowdLink) -> str:
    return (link.completion_url or PROLIFIC_COMPLETION_URL).replace("{code}", link.completion_code)


def read_ids(query: dict) -> dict:
    """The participant, platform-study and session ids from a query string, validated."""
    ids = {}
    for field, names in ID_PARAMETERS.items():
        value = next((query[name] for name in names if query.get(name)), "")
        if value and not ID_PATTERN.match(value):
            raise InputError(f"{names[0]} must be 1-64 letters, digits, '.', '_' or '-'", field=names[0])
        ids[field] = value
    if not ids["external_id"]:
        raise InputError("this link needs your participant id (PROLIFIC_PID or workerId)", field="PROLIFIC_PID")
    if ids["session"] == MTURK_PREVIEW:
        raise InputError("accept the HIT first: this is its preview", field="assignmentId")
    return ids


def enter(link: CrowdLink, query: dict) -> Participant:
    """Create or resume the participant a link's visit names; CrowdRefusal when they may not
    work (link closed, id taken by another session, screened out, blocked)."""
    if not link.active or link.study.status != Study.Status.OPEN:
        raise CrowdRefusal("this study is not taking participants at the moment")
    ids = read_ids(query)
    participant = Participant.objects.filter(link=link, external_id=ids["external_id"]).first()
    if participant is None:
        participant = _create_participant(link, ids)
    elif ids["session"] and participant.session and ids["session"] != participant.session:
        raise CrowdRefusal("this participant id is already taking part in another session")
    return check_participant(participant)


def _create_participant(link: CrowdLink, ids: dict) -> Participant:
    try:
        with transaction.atomic():
            user = get_user_model().objects.create_user(username=f"crowd-{link.pk}-{ids['external_id']}")
            user.set_unusable_password()
            user.save(update_fields=["password"])
            AnnotatorProfile.objects.create(user=user, only_study=link.study)
            return Participant.objects.create(link=link, user=user, **ids)
    except IntegrityError:
        # The same participant's second tab created them first: resume that one.
        return Participant.objects.get(link=link, external_id=ids["external_id"])


def check_participant(participant: Participant) -> Participant:
    """The participant, if they may still work; CrowdRefusal with the reason otherwise."""
    link = participant.link
    if participant.status == Participant.Status.SCREENED_OUT:
        raise CrowdRefusal("you were screened out of this study", code=link.screened_out_code)
    refusal = annotator_refusal(link.study, participant.user)
    if refusal:
        raise CrowdRefusal(refusal, code=link.screened_out_code)
    return participant


def has_finished(participant: Participant) -> bool:
    """Done: their quota judged, or nothing left for them (no claim held, nothing claimable)."""
    study, user = participant.link.study, participant.user
    if reached_cap(study, user):
        return True
    holds_claim = Assignment.objects.filter(item__study=study, annotator=user, state=Assignment.State.ACTIVE)
    return not holds_claim.exists() and not claimable_item_ids(study, user.pk, limit=1)


def complete(participant: Participant) -> bool:
    """Mark a finished participant completed (once); False while they still have work."""
    if participant.status == Participant.Status.COMPLETED:
        return True
    if not has_finished(participant):
        return False
    Participant.objects.filter(pk=participant.pk, status=Participant.Status.ACTIVE).update(
        status=Participant.Status.COMPLETED, completed_at=timezone.now()
    )
    participant.refresh_from_db()
    return participant.status == Participant.Status.COMPLETED


def screen_out(link: CrowdLink, external_id: str, *, by=None, reason: str = "screened out") -> Participant:
    """Stop a participant: their entry link shows the screen-out page, and they are blocked from
    the study (claims ended, judgments left out of its statistics)."""
    participant = Participant.objects.filter(link=link, external_id=external_id).first()
    if participant is None:
        raise InputError(f"no participant {external_id!r} on this link", field="participant")
    with transaction.atomic():
        Participant.objects.filter(pk=participant.pk).update(status=Participant.Status.SCREENED_OUT)
        block_annotator(link.study, participant.user, by=by, reason=reason)
    participant.refresh_from_db()
    return participant
