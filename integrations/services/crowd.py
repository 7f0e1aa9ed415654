"""Crowd participants, the way Prolific recruits (MTurk's names work too):

    /crowd/<slug>/?PROLIFIC_PID=<participant>&STUDY_ID=<platform study>&SESSION_ID=<session>
    /crowd/<slug>/?workerId=<participant>&hitId=<HIT>&assignmentId=<assignment>      (MTurk)

The session id is what proves who comes back: Prolific gives each participant's place in a study
its own SESSION_ID, MTurk each accepted HIT its assignmentId, and the platform puts it in the
link only for that participant. So an entry without one is refused, and the first visit binds the
participant id to its session id for good (only its digest is stored): a later visit with the
same id resumes only with the same session id (a new tab, a lost cookie, coming back later),
never with another or none, so knowing someone's id opens nobody's work.

The first visit creates a passwordless account named "Participant-N" (never the platform id),
granted the link's study alone (annotation.StudyGrant on an account scoped to its grants) with
the link's quota: the most formal items a participant judges, the link's own setting, separate
from the study's per-annotator cap (the smaller of the two applies to participants). New
participants are throttled per link and per client address. Once done they get the completion
code and go to the completion URL; blocked or screened-out participants get a page saying so
(and the screen-out code if set).
"""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac

from annotation.hot_queries import claimable_item_ids
from annotation.models import AnnotatorProfile, Assignment, Study, StudyGrant
from annotation.services.locks import lock_rows
from annotation.services.quality import block_annotator
from annotation.services.queue import reached_limit, work_standing
from marginalia.public_address import public_address
from retrieval.errors import InputError

from ..models import CrowdLink, Participant
from .recruiting import formal_judgment_counts, refuse_below_done
from .tokens import digest

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
# Crowd accounts' names; nobody else may take one (integrations.services.invitations).
PARTICIPANT_NAME = re.compile(r"^participant-", re.IGNORECASE)


class CrowdRefusal(Exception):
    """Why a participant may not (or may no longer) work, said plainly; `code` is the screen-out
    code to hand back to the platform, when the link has one."""

    status = 403

    def __init__(self, message: str, *, code: str = ""):
        super().__init__(message)
        self.code = code


class CrowdThrottled(CrowdRefusal):
    """Too many new participants at once, on this link or from this address: try again later."""

    status = 429

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message)
        self.retry_after = max(1, retry_after)


@dataclass(frozen=True)
class Entry:
    """A visit to a crowd link, read and checked but with nothing written yet: the ids it
    carries and the participant they name (None on a first visit)."""

    link: CrowdLink
    ids: dict
    participant: Participant | None


def participant_name(number: int) -> str:
    return f"Participant-{number}"


def configure_crowd_link(
    study: Study,
    *,
    completion_code: str | None = None,
    completion_url: str | None = None,
    screened_out_code: str | None = None,
    quota=...,
    active: bool | None = None,
    confirm_below_done: bool = False,
) -> CrowdLink:
    """The study's crowd link, made on first use (with a random completion code unless one is
    given); the arguments given change it. `quota` (None: no quota; left out: unchanged) is the
    link's own limit per participant; one below what a participant has already judged is
    refused with the numbers unless `confirm_below_done`."""
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
    if quota is not ...:
        if quota is not None and quota < 1:
            raise InputError("must be at least 1, or empty for no quota", field="quota")
        if quota is not None and link.pk:
            participants = link.participants.select_related("user")
            counts = formal_judgment_counts(study, [p.user for p in participants])
            refuse_below_done(counts, quota, confirmed=confirm_below_done, field="quota", people="participants")
        link.quota = quota
    with transaction.atomic():
        link.save()
        # Each participant's grant carries the quota the queue enforces (annotation knows no links).
        StudyGrant.objects.filter(study=study, annotator__participant__link=link).update(item_quota=link.quota)
    return link


def study_url(link: CrowdLink, base_url: str | None = None) -> str:
    """The URL to paste into Prolific, with its placeholders for the three ids, on the
    platform's public address unless `base_url` is given."""
    base = (base_url or public_address()).rstrip("/")
    return (
        f"{base}{reverse('crowd_entry', args=[link.slug])}"
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )


def completion_url(link: CrowdLink) -> str:
    return (link.completion_url or PROLIFIC_COMPLETION_URL).replace("{code}", link.completion_code)


def read_ids(query: dict) -> dict:
    """The participant, platform-study and session ids from a query string, validated: the
    participant and session ids are required."""
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
    if not ids["session"]:
        raise InputError(
            "this link needs your session id (SESSION_ID or assignmentId): open it from Prolific or MTurk",
            field="SESSION_ID",
        )
    return ids


def read_entry(link: CrowdLink, query: dict) -> Entry:
    """A visit checked without writing anything: InputError for missing or malformed ids,
    CrowdRefusal when the link takes nobody or the id is bound to another session."""
    if not link.active or link.study.status != Study.Status.OPEN:
        raise CrowdRefusal("this study is not taking participants at the moment")
    ids = read_ids(query)
    return Entry(link, ids, bound_participant(link, ids))


def bound_participant(link: CrowdLink, ids: dict) -> Participant | None:
    """The participant these ids name, when the session id is the one their first visit bound;
    None when nobody has this id yet. A participant without a bound session (made before
    binding existed) cannot prove who comes back, so nobody may resume them."""
    participant = (
        Participant.objects.filter(link=link, external_id=ids["external_id"]).select_related("user", "link").first()
    )
    if participant is None:
        return None
    if not participant.session_digest or not hmac.compare_digest(participant.session_digest, digest(ids["session"])):
        raise CrowdRefusal("this participant id is already taking part in another session")
    return participant


def admit(entry: Entry, *, address: str) -> Participant:
    """The entry's participant, created on a first visit (throttled: CrowdThrottled), if they
    may work; CrowdRefusal with the reason otherwise."""
    participant = entry.participant or _create_participant(entry.link, entry.ids, address)
    return check_participant(participant)


def _address_key(address: str) -> str:
    """A keyed hash of the client address: enough to count arrivals, nothing to read back."""
    return salted_hmac("integrations.crowd.address", address).hexdigest()


def _create_participant(link: CrowdLink, ids: dict, address: str) -> Participant:
    address_key = _address_key(address)
    try:
        with transaction.atomic():
            # One link's new participants one at a time (Postgres; SQLite serialises every writer),
            # so the throttle counts exactly.
            lock_rows(CrowdLink.objects.filter(pk=link.pk))
            _throttle(link, address_key)
            # No password given: an unusable one, so the account can never sign in but by its link.
            user = get_user_model().objects.create_user(username=f"participant-new-{secrets.token_hex(8)}")
            participant = Participant.objects.create(
                link=link,
                user=user,
                external_id=ids["external_id"],
                platform_study=ids["platform_study"],
                session_digest=digest(ids["session"]),
                address_digest=address_key,
            )
            user.username = _free_name(participant.pk, user.pk)
            user.save(update_fields=["username"])
            AnnotatorProfile.objects.create(user=user, only_granted=True)
            StudyGrant.objects.create(study=link.study, annotator=user, item_quota=link.quota)
            return participant
    except IntegrityError:
        # The same participant's second tab created them first: resume that one, if the session
        # is theirs.
        participant = bound_participant(link, ids)
        if participant is None:
            raise
        return participant


def _free_name(number: int, user_pk: int) -> str:
    """ "Participant-N", unless an account made by hand already holds that name."""
    name = participant_name(number)
    if get_user_model().objects.filter(username__iexact=name).exists():
        return f"{name}-{user_pk}"
    return name


def _throttle(link: CrowdLink, address_key: str) -> None:
    now = timezone.now()
    minute_ago = now - timedelta(minutes=1)
    if Participant.objects.filter(link=link, created_at__gt=minute_ago).count() >= (
        settings.MARGINALIA_CROWD_NEW_PER_LINK_PER_MINUTE
    ):
        raise CrowdThrottled(
            "many people are joining this study right now: please try again in a minute", retry_after=60
        )
    hour_ago = now - timedelta(hours=1)
    from_address = Participant.objects.filter(address_digest=address_key, created_at__gt=hour_ago)
    if from_address.count() >= settings.MARGINALIA_CROWD_NEW_PER_ADDRESS_PER_HOUR:
        oldest = from_address.order_by("created_at").values_list("created_at", flat=True).first()
        raise CrowdThrottled(
            "too many new participants have joined from your network: please try again later",
            retry_after=int((oldest + timedelta(hours=1) - now).total_seconds()) + 1,
        )


def check_participant(participant: Participant) -> Participant:
    """The participant, if they may still work; CrowdRefusal with the reason otherwise."""
    link = participant.link
    if participant.status == Participant.Status.SCREENED_OUT:
        raise CrowdRefusal("you were screened out of this study", code=link.screened_out_code)
    refusal = work_standing(link.study, participant.user).refusal
    if refusal:
        raise CrowdRefusal(refusal, code=link.screened_out_code)
    return participant


def has_finished(participant: Participant) -> bool:
    """Done: their quota (or the study's cap) judged, or nothing left for them (no claim held,
    nothing claimable)."""
    study, user = participant.link.study, participant.user
    if reached_limit(study, user, work_standing(study, user).item_limit):
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


def find_participant(link: CrowdLink, who: str) -> Participant:
    """A link's participant by platform id or by name ("Participant-N"), for staff."""
    participant = Participant.objects.filter(link=link).filter(Q(external_id=who) | Q(user__username=who)).first()
    if participant is None:
        raise InputError(f"no participant {who!r} on this link", field="participant")
    return participant


def screen_out(link: CrowdLink, who: str, *, by=None, reason: str = "screened out") -> Participant:
    """Stop a participant (platform id or name): their entry link shows the screen-out page,
    and they are blocked from the study (claims ended, judgments left out of its statistics)."""
    participant = find_participant(link, who)
    with transaction.atomic():
        Participant.objects.filter(pk=participant.pk).update(status=Participant.Status.SCREENED_OUT)
        block_annotator(link.study, participant.user, by=by, reason=reason)
    participant.refresh_from_db()
    return participant
