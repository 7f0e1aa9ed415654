"""The work queue: claiming items, submitting judgments, voiding them.

Every judgment of an item occupies one of its `judgments_per_item` slots through a live
Assignment; the database refuses a second live claim of the same (item, slot) or (item,
annotator). Claims lock the item row (SELECT ... FOR UPDATE where the database has it; SQLite
serialises writers with BEGIN IMMEDIATE) and retry when a racing claim wins, so no item ever
gets more judgments than it needs and no annotator judges an item twice.

Quality control shapes the queue: in a study with a qualification round an annotator is served
its qualification questions (answers go to their qualification attempt, not to judgments) until
they pass; hidden gold items are ordinary items of the queue (role "gold", placed among the
others when designated) and are claimed and shown exactly like work items; an annotator blocked
from the study (StudyBlock) or everywhere (AnnotatorProfile.blocked) gets no work; an item whose
answer an annotator was shown in a peer review is never served to them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from retrieval.errors import InputError

from .. import hot_queries
from ..events import item_complete, judgment_submitted, study_complete
from ..label_schema import study_schema
from ..models import (
    LIVE_ASSIGNMENT_STATES,
    Assignment,
    Item,
    ItemCandidate,
    Judgment,
    QualificationAnswer,
    Study,
)
from ..post_editing import proposal_record
from ..presentation import item_positions, shown_order
from ..selectors import annotator_item_payload, annotator_progress, finished_payload, item_limit, shown_item
from .labels import Answer, validate_answer
from .live_counts import refresh_live_counts
from .locks import lock_rows
from .pools import draw_for_claim
from .qualification import next_question, qualification_state, record_answer

# Client-reported seconds outside this range are clamped: a day is longer than any honest item.
MAX_REPORTED_SECONDS = 24 * 3600.0
CLAIM_ATTEMPTS = 5
# How many of the neediest items one claim attempt looks at before giving up on this round.
CLAIM_CANDIDATES = 20


class AnnotationForbidden(PermissionDenied):
    """The annotator may not work on this study (blocked, not on the study's list, inactive).
    A PermissionDenied, so pages and the API answer 403 with the reason without catching it."""


class SubmissionRejected(Exception):
    """A submission that cannot be stored. `conflict` marks the ones about the state of the
    queue (no claim, claim lost, study closed) rather than a malformed answer."""

    def __init__(self, message: str, *, conflict: bool = False):
        super().__init__(message)
        self.conflict = conflict


@dataclass(frozen=True)
class Submission:
    judgment: Judgment | None  # None for an answer in a qualification round
    created: bool  # False: the annotator had already answered this item; the stored answer stands
    qualification_answer: QualificationAnswer | None = None


@dataclass(frozen=True)
class WorkStanding:
    """Whether an annotator may work on a study (`refusal`: why not) and the most formal items
    they may judge there (`item_limit`, None: no limit)."""

    refusal: str | None
    item_limit: int | None


def work_standing(study: Study, annotator) -> WorkStanding:
    """The annotator's standing in the study, in one statement (annotation.hot_queries: it runs
    on every request an annotator makes). Refused: inactive, blocked everywhere or from this
    study, an account scoped to its granted studies without this one, not on the study's list
    (unless the study was granted to them: an invitation or crowd link lets its holder in), or
    locked out by its qualification round (or the round has no questions yet). Being still in
    the round is no refusal."""
    if not annotator.is_active:
        return WorkStanding("your account is inactive", None)
    standing = hot_queries.standing(study.pk, annotator.pk)
    limit = item_limit(study.max_items_per_annotator, standing["item_quota"])
    if standing["blocked_everywhere"]:
        return WorkStanding("your account is blocked from annotation", limit)
    if not standing["granted"]:
        if standing["only_granted"]:
            return WorkStanding("your account may work only on the studies you were invited to", limit)
        if standing["has_list"] and not standing["listed"]:
            return WorkStanding("you are not one of this study's annotators", limit)
    if standing["blocked_here"]:
        return WorkStanding("you are blocked from this study", limit)
    return WorkStanding(qualification_state(study, annotator).refusal(), limit)


def annotator_refusal(study: Study, annotator) -> str | None:
    """Why `annotator` may not work on `study` (work_standing), or None when they may."""
    return work_standing(study, annotator).refusal


def lock_item_unless_taken(item_id: int) -> bool:
    """Lock the item's row unless another transaction holds it (SKIP LOCKED): False then. A claim
    walks the neediest items in an order of its own and keeps the locks it took on full ones, so
    two claimers waiting for each other's next item deadlocked under twenty annotators; one that
    never waits cannot, and an item someone else is claiming or answering is no better a pick."""
    if not connection.features.has_select_for_update:
        return True
    locked = (
        Item.objects.filter(pk=item_id).select_for_update(skip_locked=True, no_key=True).values_list("pk", flat=True)
    )
    return locked.first() is not None


def claim_next_item(study: Study, annotator) -> Assignment | None:
    """The annotator's current claim in the study, or a new claim on the item that most needs a
    judgment and that they have not judged; None when nothing is left for them.

    Raises AnnotationForbidden for blocked, inactive or not-allowed annotators, and for those
    who have not passed the study's qualification round (next_work serves them its questions).
    """
    standing = work_standing(study, annotator)
    if standing.refusal:
        raise AnnotationForbidden(standing.refusal)
    if not qualification_state(study, annotator).qualified:
        raise AnnotationForbidden("pass this study's qualification round first")
    return _claim_for_qualified(study, annotator, standing.item_limit)


def _claim_for_qualified(study: Study, annotator, limit: int | None) -> Assignment | None:
    """claim_next_item once the annotator's standing (and their item limit) is known to be good."""
    if study.status != Study.Status.OPEN:
        return None
    for attempt in range(1, CLAIM_ATTEMPTS + 1):
        try:
            with transaction.atomic():
                return _claim(study, annotator, limit)
        except _QueueMoved:
            continue
        except (IntegrityError, OperationalError):
            # A racing claim took the slot between our look and our insert (IntegrityError), or
            # two claimers each locked an item the other wanted next (a deadlock the database
            # broke by failing one of them): look again with fresh counts.
            if attempt == CLAIM_ATTEMPTS:
                raise
    return None


class _QueueMoved(Exception):
    """Every item that looked free was filled by others before we could lock it."""


def _claim(study: Study, annotator, limit: int | None) -> Assignment | None:
    """One claim attempt (in a transaction): the annotator's unexpired claim again, else a slot of
    the neediest item they may judge. The returned assignment carries its item, the item's
    query and the study, ready for the payload."""
    now = timezone.now()
    # Serialise one annotator's own requests (two tabs): they must resume, not claim twice.
    lock_rows(get_user_model().objects.filter(pk=annotator.pk))
    current = (
        Assignment.objects.filter(
            item__study=study, annotator=annotator, state=Assignment.State.ACTIVE, expires_at__gt=now
        )
        .select_related("item__query")
        .order_by("claimed_at")
        .first()
    )
    if current is not None:
        current.item.study = study
        return current
    if reached_limit(study, annotator, limit):
        return None
    expire_stale_claims(study, now)
    needy = hot_queries.claimable_item_ids(study, annotator.pk, limit=CLAIM_CANDIDATES)
    if not needy:  # an adaptive pool draws its next pair for them (services/pools.py)
        needy = draw_for_claim(study)
    for item_id in needy:
        if not lock_item_unless_taken(item_id):
            continue
        slot = free_slot(item_id, study.judgments_per_item)
        if slot is not None:
            assignment = Assignment.objects.create(
                item_id=item_id,
                annotator=annotator,
                slot=slot,
                expires_at=now + timedelta(minutes=study.claim_minutes),
            )
            assignment.item = Item.objects.select_related("query").get(pk=item_id)
            assignment.item.study = study
            return assignment
    if needy:
        raise _QueueMoved
    return None


def reached_limit(study: Study, annotator, limit: int | None) -> bool:
    """Whether the annotator has judged `limit` formal items of the study (WorkStanding's
    item_limit: the study's cap or their own quota; a voided judgment still counts: the work was
    done)."""
    if limit is None:
        return False
    return (
        Judgment.objects.filter(item__study=study, annotator=annotator)
        .exclude(item__role=Item.Role.QUALIFICATION)
        .count()
        >= limit
    )


def items_still_to_judge(study: Study, annotator) -> set[int]:
    """Ids of the formal items `annotator` may still be asked to judge: those the queue may give
    them and the one they hold a claim on. Showing them another's answer to one of these (peer
    review) would bias the judgment they have yet to give."""
    held = Assignment.objects.filter(item__study=study, annotator=annotator, state=Assignment.State.ACTIVE)
    return {*hot_queries.claimable_item_ids(study, annotator.pk), *held.values_list("item_id", flat=True)}


def next_work(study: Study, annotator) -> dict:
    """The annotator's current or next item as shown to them, or the finished payload. What the
    web page and the API both serve. Until the annotator passes the study's qualification round
    the item is their next qualification question; `qualification` always says where they stand
    (QualificationState.payload: status, attempt n of m, the last attempt's result)."""
    standing = work_standing(study, annotator)
    if standing.refusal:
        raise AnnotationForbidden(standing.refusal)
    state = qualification_state(study, annotator)
    if not state.qualified:
        return _next_question_payload(study, annotator)
    assignment = _claim_for_qualified(study, annotator, standing.item_limit)
    payload = finished_payload(study, annotator) if assignment is None else annotator_item_payload(assignment)
    return {**payload, "qualification": state.payload()}


def _next_question_payload(study: Study, annotator) -> dict:
    """The annotator's next qualification question, shaped like a work item (no claim, so no
    expiry), or the finished payload while the study is closed."""
    question = next_question(study, annotator) if study.status == Study.Status.OPEN else None
    state = qualification_state(study, annotator)
    if question is None:
        if state.qualified:  # the question just scored passed the round: formal work is next
            return next_work(study, annotator)
        refusal = state.refusal()
        if refusal:
            raise AnnotationForbidden(refusal)
        return {**finished_payload(study, annotator), "qualification": state.payload()}
    return {
        "finished": False,
        **shown_item(question[1], annotator.pk),
        "expires_at": None,
        "progress": annotator_progress(study, annotator),
        "qualification": state.payload(),
    }


def expire_stale_claims(study: Study, now=None) -> int:
    """Return abandoned claims to the queue (done lazily, whenever someone looks for work)."""
    return Assignment.objects.filter(
        item__study=study, state=Assignment.State.ACTIVE, expires_at__lte=now or timezone.now()
    ).update(state=Assignment.State.EXPIRED)


def free_slot(item: Item | int, slots: int) -> int | None:
    """The lowest of the item's slots that no live assignment holds (call with the item locked)."""
    live = Assignment.objects.filter(item=item, state__in=LIVE_ASSIGNMENT_STATES)
    taken = set(live.values_list("slot", flat=True))
    return next((slot for slot in range(slots) if slot not in taken), None)


def submit_judgment(
    *,
    annotator,
    item: Item,
    candidate: ItemCandidate | None = None,
    candidate_id: int | None = None,
    position: int | None = None,
    label=None,
    spans=None,
    rubric=None,
    rationale="",
    selections=None,
    seconds=None,
    unsure: bool = False,
) -> Submission:
    """Store the annotator's answer to `item`: a candidate (the ItemCandidate, its id as the
    payload gave it, or its 0-based position as shown to this annotator) for proxy studies; for
    label studies a label (or a multi-select's selected positions, as shown) with the spans,
    rubric and rationale the study's schema asks for (see labels.validate_answer). Positions
    are read in the order this annotator was shown (annotation.presentation), which the
    judgment records (`shown_order`); what is stored is the candidate itself (item positions).
    `unsure` keeps the annotator's "I am guessing" mark beside the answer (not for
    qualification answers, which are scored either way).

    Idempotent: when the annotator already judged the item, the stored judgment is returned
    unchanged, whatever the new answer. A claim that expired still counts if one of the item's
    slots is free (the annotator did the work; nobody else took their place); otherwise the
    submission is rejected.
    """
    study = item.study
    refusal = annotator_refusal(study, annotator)
    if refusal:
        raise AnnotationForbidden(refusal)
    if item.role == Item.Role.QUALIFICATION:
        return _submit_qualification_answer(
            annotator,
            item,
            candidate=candidate,
            candidate_id=candidate_id,
            position=position,
            label=label,
            spans=spans,
            rubric=rubric,
            rationale=rationale,
            selections=selections,
        )
    try:
        with transaction.atomic():
            # Under the item's lock a racing double submission sees the first one's judgment.
            lock_rows(Item.objects.filter(pk=item.pk))
            claims = list(Assignment.objects.filter(item=item, annotator=annotator).order_by("-claimed_at"))
            active = next((claim for claim in claims if claim.state == Assignment.State.ACTIVE), None)
            # A live claim means no judgment yet (the claim turns "submitted" with it); without
            # one, an earlier answer may stand.
            stored = None if active else Judgment.objects.filter(item=item, annotator=annotator).first()
            if stored is not None:
                return Submission(stored, created=False)
            if study.status != Study.Status.OPEN:
                raise SubmissionRejected("this study is closed", conflict=True)
            # The claim first: an item the annotator does not hold says nothing about its answer's
            # shape (how many candidates, how long its texts are). A claim revived here is rolled
            # back with the rest when the answer is then rejected.
            assignment = active or _revived_claim(item, claims)
            answer, order = resolve_answer(
                item,
                annotator,
                candidate=candidate,
                candidate_id=candidate_id,
                position=position,
                label=label,
                spans=spans,
                rubric=rubric,
                rationale=rationale,
                selections=selections,
            )
            now = timezone.now()
            judgment = Judgment.objects.create(
                item=item,
                annotator=annotator,
                assignment=assignment,
                **answer.judgment_fields(),
                **proposal_record(
                    item,
                    choice_position=answer.choice.position if answer.choice else None,
                    label=answer.label,
                    selections=answer.selections,
                ),
                shown_order=order,
                unsure=bool(unsure),
                seconds=clamp_seconds(seconds),
                server_seconds=(now - assignment.claimed_at).total_seconds(),
                source=Judgment.Source.WEB,
            )
            Assignment.objects.filter(pk=assignment.pk).update(state=Assignment.State.SUBMITTED, submitted_at=now)
            refresh_live_counts(study, Item.objects.filter(pk=item.pk))
            announce_judgment(judgment)
    except IntegrityError:
        # The database refused a second judgment of the same annotator: the first one stands.
        stored = Judgment.objects.filter(item=item, annotator=annotator).first()
        if stored is None:
            raise SubmissionRejected(
                "this item's judgments were completed by others meanwhile", conflict=True
            ) from None
        return Submission(stored, created=False)
    return Submission(judgment, created=True)


def announce_judgment(judgment: Judgment) -> None:
    """Tell listeners (annotation.events) about a stored judgment, and about the item and the
    study it completed, if it did. Called inside the submitting transaction."""
    judgment_submitted.send(sender=Judgment, judgment=judgment)
    item, study = judgment.item, judgment.item.study
    if _submitted_count(Item.objects.filter(pk=item.pk)) < study.judgments_per_item:
        return
    item_complete.send(sender=Item, item=item)
    formal = Item.objects.filter(study=study).exclude(role=Item.Role.QUALIFICATION)
    if not formal.annotate(done=_SUBMITTED).filter(done__lt=study.judgments_per_item).exists():
        study_complete.send(sender=Study, study=study)


_SUBMITTED = Count("assignments", filter=Q(assignments__state=Assignment.State.SUBMITTED))


def _submitted_count(items: QuerySet[Item]) -> int:
    return items.annotate(done=_SUBMITTED).values_list("done", flat=True).first() or 0


def _submit_qualification_answer(annotator, item: Item, **parts) -> Submission:
    """An answer to a qualification question, stored in the annotator's open attempt (never as
    a Judgment). Idempotent within the attempt, like judgments: a second answer to the same
    question returns the first one."""
    study = item.study
    with transaction.atomic():
        lock_rows(get_user_model().objects.filter(pk=annotator.pk))
        state = qualification_state(study, annotator)
        if state.qualified:
            raise SubmissionRejected("you have already passed this study's qualification round", conflict=True)
        if state.current is None:
            raise SubmissionRejected("no qualification attempt is open: ask for your next item first", conflict=True)
        stored = QualificationAnswer.objects.filter(attempt=state.current, item=item).first()
        if stored is not None:
            return Submission(None, created=False, qualification_answer=stored)
        if study.status != Study.Status.OPEN:
            raise SubmissionRejected("this study is closed", conflict=True)
        answer, _order = resolve_answer(item, annotator, **parts)
        recorded = record_answer(state.current, item, answer)
    return Submission(None, created=True, qualification_answer=recorded)


def resolve_answer(
    item: Item, annotator, *, candidate_id: int | None = None, position=None, selections=None, **parts
) -> tuple[Answer, list[int]]:
    """The answer validated against the study's kind and schema (a malformed one is rejected
    with the offending field named), and the order the annotator was shown the item's
    candidates in (item positions, first shown first). Positions and selections come as shown
    and are read as item positions; a candidate id is looked up among the item's candidates.

    The candidates are read once, here, and handed to the validation (which would otherwise
    read them itself): recording the order costs no statement. A label item without several
    candidates shows its one passage: its order is [0] and nothing is read."""
    study = item.study
    several = (
        study.kind in (Study.Kind.PROXY, Study.Kind.PREFERENCE)
        or study_schema(study)["multi_select"]
        or candidate_id is not None
    )
    shown = list(ItemCandidate.objects.filter(item=item).order_by("position")) if several else None
    order = shown_order(study, item.pk, annotator.pk, len(shown)) if shown is not None else [0]
    candidate = parts.pop("candidate", None)
    if candidate_id is not None:
        candidate = next((option for option in shown if option.pk == candidate_id), None)
        if candidate is None:
            raise SubmissionRejected(str(InputError("not one of this item's candidates", field="candidate")))
    if position is not None:
        position = item_positions(order, position)
    if isinstance(selections, (list, tuple)) and len(set(map(str, selections))) == len(selections):
        # (A list naming a position twice is refused as sent, in the annotator's own numbers.)
        selections = [item_positions(order, value) for value in selections]
    try:
        answer = validate_answer(
            study, item, candidate=candidate, position=position, selections=selections, shown=shown, **parts
        )
    except InputError as exc:
        raise SubmissionRejected(str(exc)) from exc
    return answer, order


def _revived_claim(item: Item, claims: list[Assignment]) -> Assignment:
    """The annotator's latest expired claim on the item (`claims`: theirs, newest first) revived
    into a free slot; refused when they skipped the item, never held it, or it is complete."""
    expired = next((claim for claim in claims if claim.state == Assignment.State.EXPIRED), None)
    if expired is None:
        skipped = any(claim.state == Assignment.State.SKIPPED for claim in claims)
        raise SubmissionRejected(
            "you skipped this item" if skipped else "you hold no claim on this item", conflict=True
        )
    slot = free_slot(item, item.study.judgments_per_item)
    if slot is None:
        raise SubmissionRejected("your claim expired and others have completed this item", conflict=True)
    Assignment.objects.filter(pk=expired.pk).update(state=Assignment.State.ACTIVE, slot=slot)
    expired.refresh_from_db()
    return expired


def clamp_seconds(seconds) -> float | None:
    """Client-reported time, kept within [0, MAX_REPORTED_SECONDS]; None when absent or not a
    finite number (a broken timer says nothing)."""
    if seconds is None or isinstance(seconds, bool):
        return None
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value):
        return None
    return min(MAX_REPORTED_SECONDS, max(0.0, value))


MAX_VOID_REASON = 2000


def clean_void_reason(reason) -> str:
    """A void's reason, stripped: required, at most MAX_VOID_REASON characters (the page form's
    limit) and free of NUL characters (which Postgres refuses to store). Every void path, one
    judgment or many (rework.py), reads its reason through here."""
    reason = reason.strip() if isinstance(reason, str) else ""
    if not reason:
        raise InputError("a reason is required to void a judgment", field="reason")
    if len(reason) > MAX_VOID_REASON:
        raise InputError(f"at most {MAX_VOID_REASON} characters", field="reason")
    if "\x00" in reason:
        raise InputError("NUL characters are not allowed", field="reason")
    return reason


def void_in_bulk(judgments: QuerySet[Judgment], *, study: Study, items: QuerySet[Item], by, reason: str) -> int:
    """Void the live `judgments` (a queryset at any size) with the cleaned `reason` and free their
    slots, as void_judgment does one at a time, in two UPDATE statements over subqueries (never a
    per-row save, nor an IN list of every id); how many were voided. Inside the caller's
    transaction. On Postgres the judgments are locked first, then their assignments written: the
    order void_judgment and undo follow, so a racing undo either finds its judgment voided or has
    deleted it already (SQLite's IMMEDIATE transactions serialise every writer). No post_save
    fires: callers that change what the adjudication queue orders say so themselves. `items` (the
    study's, read the same before and after the voids) hold the judgments: they are locked before
    the judgments, in the order undo and
    void_judgment take them, and their stored live counts recounted after the voids."""
    judgments = judgments.filter(voided=False)
    lock_rows(items)
    lock_rows(judgments)
    Assignment.objects.filter(pk__in=judgments.filter(assignment__isnull=False).values("assignment_id")).update(
        state=Assignment.State.VOIDED
    )
    voided = judgments.update(voided=True, void_reason=reason, voided_by=by, voided_at=timezone.now())
    refresh_live_counts(study, items)
    return voided


def void_judgment(judgment: Judgment, *, by, reason: str) -> Judgment:
    """Exclude a judgment from statistics, keeping it for the record. Its slot is freed, so the
    item goes back to the queue for someone else (never the same annotator: one judgment per
    item and annotator, voided or not). Voiding twice keeps the first reason."""
    reason = clean_void_reason(reason)
    with transaction.atomic():
        # The item first, as undo and revisions lock it: its stored live counts change too.
        item = Item.objects.filter(pk=judgment.item_id)
        lock_rows(item)
        judgment = Judgment.objects.select_for_update().get(pk=judgment.pk)
        if judgment.voided:
            return judgment
        judgment.voided, judgment.void_reason = True, reason
        judgment.voided_by, judgment.voided_at = by, timezone.now()
        judgment.save(update_fields=["voided", "void_reason", "voided_by", "voided_at"])
        if judgment.assignment_id:
            Assignment.objects.filter(pk=judgment.assignment_id).update(state=Assignment.State.VOIDED)
        refresh_live_counts(judgment.item.study, item)
    return judgment
