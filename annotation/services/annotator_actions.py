"""What an annotator may do besides answering: skip an item, flag a broken one, take back the
answer they just gave, and read more of the book around a candidate.

- Skip: the annotator's claim turns "skipped", which frees its slot for someone else and stays
  as the record that they passed the item over (the queue never serves it to them again).
- Flag: a reason staff read on the study page and through the staff API (`item_flags`); one per
  annotator and item. Flagging does not skip: the annotator may still answer or skip.
- Undo: within MARGINALIA_UNDO_SECONDS of submitting, the annotator's latest judgment in the
  study is withdrawn and its claim reopened for them alone (its slot never goes back to the
  queue, so nobody else can take it meanwhile), as long as nobody else has seen the answer yet:
  no peer review drawn, not voided, the item not adjudicated, (adaptive preference studies) no
  new pairs chosen from it, never revised (revisions.py keeps a revised answer's history, which a
  deletion would lose), and as long as the annotator has not skipped an item since (a skip is
  their next decision: the answer before it is settled, and the page stops offering it). The
  claim they took on the next item is returned to the queue. Afterwards only a recorded revision
  may change the answer, where the study allows it.
- More context: for studies that allow it, the sentences before and after a candidate of the
  item the annotator holds, read from the candidate's book.

Every action needs the same standing as answering (`annotator_refusal`) and reaches only the
annotator's own claims and judgments.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet
from django.utils import timezone

from retrieval.errors import InputError
from retrieval.models import Sentence

from ..models import (
    Adjudication,
    Assignment,
    Item,
    ItemCandidate,
    ItemFlag,
    Judgment,
    PeerReview,
    PreferenceQuery,
    Study,
)
from .live_counts import refresh_live_counts
from .locks import lock_rows
from .queue import AnnotationForbidden, SubmissionRejected, annotator_refusal

MAX_FLAG_REASON = 2000
# Sentences shown on each side of a candidate by "more context".
MORE_CONTEXT_SENTENCES = 5


def undo_seconds() -> float:
    """The grace period after a submission during which it may be taken back."""
    return max(0.0, float(settings.MARGINALIA_UNDO_SECONDS))


def undo_deadline(judgment: Judgment) -> datetime:
    """Until when the judgment may be taken back, if nothing else stands in the way."""
    return judgment.submitted_at + timedelta(seconds=undo_seconds())


def _ensure_allowed(study: Study, annotator) -> None:
    refusal = annotator_refusal(study, annotator)
    if refusal:
        raise AnnotationForbidden(refusal)


def _lock_annotator(annotator) -> None:
    """Serialise one annotator's own requests (two tabs, a double click), as claims do."""
    lock_rows(get_user_model().objects.filter(pk=annotator.pk))


# --- skip ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Skip:
    item: Item
    created: bool  # False: the annotator had already skipped it


def skip_item(item: Item, annotator) -> Skip:
    """Give the annotator's claim on `item` back to the queue for others and never serve the
    item to them again. Idempotent; refused for an item they do not hold (or already answered)."""
    study = item.study
    _ensure_allowed(study, annotator)
    if item.role == Item.Role.QUALIFICATION:
        raise SubmissionRejected("qualification questions cannot be skipped", conflict=True)
    with transaction.atomic():
        _lock_annotator(annotator)
        claims = Assignment.objects.filter(item=item, annotator=annotator)
        if claims.filter(state=Assignment.State.SKIPPED).exists():
            return Skip(item, created=False)
        if not claims.filter(state=Assignment.State.ACTIVE).update(state=Assignment.State.SKIPPED):
            raise SubmissionRejected("you hold no claim on this item", conflict=True)
    return Skip(item, created=True)


# --- flag ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flagging:
    flag: ItemFlag
    created: bool  # False: the annotator had flagged it before; the first reason stands


def flag_item(item: Item, annotator, reason: str) -> Flagging:
    """Record that the annotator finds `item` broken, with their reason. Only an item they were
    given (claimed, answered or skipped) may be flagged."""
    _ensure_allowed(item.study, annotator)
    reason = (reason or "").strip()
    if not reason:
        raise InputError("say what is wrong with the item", field="reason")
    if len(reason) > MAX_FLAG_REASON:
        raise InputError(f"at most {MAX_FLAG_REASON} characters", field="reason")
    if "\x00" in reason:
        raise InputError("NUL characters are not allowed", field="reason")
    if not Assignment.objects.filter(item=item, annotator=annotator).exists():
        raise SubmissionRejected("you can only flag items you were given", conflict=True)
    flag, created = ItemFlag.objects.get_or_create(item=item, annotator=annotator, defaults={"reason": reason})
    return Flagging(flag, created)


# --- undo ----------------------------------------------------------------------------------------


class UndoRefused(SubmissionRejected):
    """Nothing may be taken back: no recent answer, the grace period is over, or someone else
    has seen the answer. Always a conflict with the state of the queue (409)."""

    def __init__(self, message: str):
        super().__init__(message, conflict=True)


@dataclass(frozen=True)
class Undoable:
    judgment: Judgment
    until: datetime

    def payload(self) -> dict:
        return {"item": self.judgment.item_id, "until": self.until.isoformat(), "seconds_left": self.seconds_left()}

    def seconds_left(self) -> float:
        return max(0.0, (self.until - timezone.now()).total_seconds())


SEEN_BY_OTHERS = "someone else has already seen this answer; it is final"


def with_seen_by_others(judgments: QuerySet[Judgment]) -> QuerySet[Judgment]:
    """The judgments, each annotated `seen`: whether someone else has seen its answer (staff
    voided it, a peer review was drawn on it, or its item was adjudicated: a verdict or decision
    always refers to the answer it saw). Such an answer is final: neither undo nor a revision
    (revisions.py) may change it. One statement for any number of judgments."""
    return judgments.annotate(
        seen=ExpressionWrapper(
            Q(voided=True)
            | Exists(PeerReview.objects.filter(judgment=OuterRef("pk")))
            | Exists(Adjudication.objects.filter(item_id=OuterRef("item_id"))),
            output_field=BooleanField(),
        )
    )


def seen_by_others(judgment: Judgment) -> bool:
    """with_seen_by_others for one judgment read without it (one statement; none when voided)."""
    if judgment.voided:
        return True
    return bool(with_seen_by_others(Judgment.objects.filter(pk=judgment.pk)).values_list("seen", flat=True).first())


def last_submission(study: Study, annotator) -> Judgment | None:
    """The annotator's latest answer given on the web in this study."""
    return (
        Judgment.objects.filter(item__study=study, annotator=annotator, source=Judgment.Source.WEB)
        .order_by("-submitted_at", "-pk")
        .first()
    )


def undoable_submission(study: Study, annotator) -> Undoable | None:
    """The annotator's answer that `undo_last_submission` would take back now, or None."""
    judgment = last_submission(study, annotator)
    if judgment is None or _undo_refusal(study, judgment, timezone.now()) is not None:
        return None
    return Undoable(judgment, undo_deadline(judgment))


def _undo_refusal(study: Study, judgment: Judgment, now: datetime) -> str | None:
    if study.status != Study.Status.OPEN:
        return "this study is closed"
    if now > undo_deadline(judgment):
        return f"answers can be taken back only within {undo_seconds():g} seconds; this one is final"
    if judgment.assignment_id is None:
        return "this answer holds no claim to reopen"
    if judgment.revision > 1:
        return "you revised this answer; its earlier versions are kept, so it can no longer be taken back"
    if Assignment.objects.filter(
        item__study=study,
        annotator_id=judgment.annotator_id,
        state=Assignment.State.SKIPPED,
        claimed_at__gt=judgment.submitted_at,
    ).exists():
        return "you skipped an item since; this answer is final"
    if seen_by_others(judgment):
        return SEEN_BY_OTHERS
    if (
        study.kind == Study.Kind.PREFERENCE
        and PreferenceQuery.objects.filter(
            study=study, query_id=judgment.item.query_id, moved_at__gte=judgment.submitted_at
        ).exists()
    ):
        return "this answer already chose the next pairs to compare (or ended the query); it is final"
    return None


def undo_last_submission(study: Study, annotator) -> Item:
    """Withdraw the annotator's latest answer in the study and reopen their claim on its item
    (see the module docstring for when this is allowed); returns the item, to be answered again."""
    _ensure_allowed(study, annotator)
    with transaction.atomic():
        _lock_annotator(annotator)
        judgment = last_submission(study, annotator)
        if judgment is None:
            raise UndoRefused("you have no answer to take back")
        # The item's lock orders us with a peer-review draw, a void or a racing submission.
        lock_rows(Item.objects.filter(pk=judgment.item_id))
        judgment = Judgment.objects.select_for_update().get(pk=judgment.pk)
        now = timezone.now()
        refusal = _undo_refusal(study, judgment, now)
        if refusal:
            raise UndoRefused(refusal)
        Assignment.objects.filter(item__study=study, annotator=annotator, state=Assignment.State.ACTIVE).update(
            state=Assignment.State.EXPIRED
        )
        Assignment.objects.filter(pk=judgment.assignment_id).update(
            state=Assignment.State.ACTIVE,
            submitted_at=None,
            expires_at=now + timedelta(minutes=study.claim_minutes),
        )
        Judgment.objects.filter(pk=judgment.pk).delete()
        refresh_live_counts(study, Item.objects.filter(pk=judgment.item_id))
    return judgment.item


# --- more context --------------------------------------------------------------------------------


def candidate_context(study: Study, annotator, candidate_id: int) -> dict:
    """The sentences around a candidate of the item the annotator holds now, from its book:
    `before` and `after` (up to MORE_CONTEXT_SENTENCES each) and the candidate's own `sentences`.
    Refused where the study does not allow it, for items the annotator does not hold, and for
    candidates that are not windows of a book."""
    _ensure_allowed(study, annotator)
    if not study.more_context:
        raise AnnotationForbidden("this study does not show more context")
    candidate = (
        ItemCandidate.objects.filter(
            pk=candidate_id,
            item__study=study,
            item__assignments__annotator=annotator,
            item__assignments__state=Assignment.State.ACTIVE,
        )
        .select_related("passage")
        .first()
    )
    if candidate is None:
        raise SubmissionRejected("not a candidate of the item you hold", conflict=True)
    passage = candidate.passage
    if passage.document_id is None or passage.start is None or not passage.length:
        raise SubmissionRejected("this candidate has no surrounding text to show", conflict=True)
    end = passage.start + passage.length
    sentences = dict(
        Sentence.objects.filter(
            document_id=passage.document_id,
            index__gte=max(0, passage.start - MORE_CONTEXT_SENTENCES),
            index__lt=end + MORE_CONTEXT_SENTENCES,
        ).values_list("index", "text")
    )
    return {
        "candidate": candidate.pk,
        "before": [text for index, text in sorted(sentences.items()) if index < passage.start],
        "sentences": [text for index, text in sorted(sentences.items()) if passage.start <= index < end],
        "after": [text for index, text in sorted(sentences.items()) if index >= end],
    }
