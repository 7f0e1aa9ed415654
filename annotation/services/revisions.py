"""Annotators going back to their earlier answers, where the study allows it
(`Study.allow_revisions`, off by default).

A revision is never a silent change: the answer it replaces is first kept as a
`JudgmentRevision` (its number, when it was given, when and by whom it was replaced), then the
judgment takes the new answer, its `revision` number grows by one and `revised_at` says when.
The judgment row always holds the latest answer, so every statistic, report, qrels file and
export reads the latest revision; the judgment exports carry `revision` and `revised_at`, and
reports count the revised judgments (`revisions`). The answer's seconds stay those of the first
answer (the time it took to judge the item).

The rules, the same as undo's (annotator_actions) where they meet:
- only the annotator's own judgments, given on the web, of an open study that allows revisions,
  while the annotator may still work there (annotator_refusal);
- not once someone else has seen the answer: a peer review drawn on it, staff voided it, or the
  item was adjudicated (a verdict or decision always refers to the answer it saw);
- a revised judgment can no longer be taken back with undo (undo deletes; a revision's history
  must stay), and undo's grace period does not limit revisions;
- the new answer is validated exactly like a submission (labels.validate_answer); an answer equal
  to the current one records nothing.
Annotators see only their own answers as they gave them: never gold, correctness, others'
answers or where a candidate came from.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db import transaction
from django.db.models import Count, F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..label_schema import study_schema
from ..models import Item, ItemCandidate, Judgment, JudgmentRevision, Study
from ..presentation import shown_order, shown_position
from ..selectors import answer_fields, preview, query_display_text, shown_item
from .annotator_actions import SEEN_BY_OTHERS, seen_by_others, with_seen_by_others
from .live_counts import refresh_live_counts
from .locks import lock_rows
from .queue import AnnotationForbidden, SubmissionRejected, annotator_refusal, resolve_answer

ANSWERS_PER_PAGE = 50
NOT_ALLOWED = "this study does not let annotators revise their answers"
NOT_FOR_PREFERENCES = "answers in a preference study cannot be revised: the next pairs were chosen from them"
# What an answer is made of: compared to tell a revision from a resubmission of the same answer.
ANSWER_FIELDS = ("choice_id", "label", "spans", "selections", "rubric", "rationale", "unsure")


class RevisionRefused(SubmissionRejected):
    """The answer may not be revised now (closed study, seen by others, imported). A conflict with
    the state of the study (409), never a malformed answer."""

    def __init__(self, message: str):
        super().__init__(message, conflict=True)


@dataclass(frozen=True)
class Revision:
    judgment: Judgment
    created: bool  # False: the new answer equals the current one; nothing was recorded


def ensure_revisions_open(study: Study, annotator) -> None:
    """Refuse (403) an annotator who may not see their answers here: the study does not allow
    revisions, or they may not work on it (blocked, not admitted, inactive)."""
    if not study.allow_revisions:
        raise AnnotationForbidden(NOT_ALLOWED)
    if study.kind == Study.Kind.PREFERENCE:
        raise AnnotationForbidden(NOT_FOR_PREFERENCES)
    refusal = annotator_refusal(study, annotator)
    if refusal:
        raise AnnotationForbidden(refusal)


def own_judgments(study: Study, annotator) -> QuerySet[Judgment]:
    """The annotator's judgments in the study (qualification answers are never judgments)."""
    return Judgment.objects.filter(item__study=study, annotator=annotator)


def own_judgment(study: Study, annotator, item_id: int) -> Judgment | None:
    """The annotator's judgment of the study's item `item_id`, or None: another study's item,
    an item they did not judge, or someone else's judgment all look the same."""
    return own_judgments(study, annotator).filter(item_id=item_id).select_related("item__query", "choice").first()


def revision_refusal(study: Study, judgment: Judgment, seen: bool | None = None) -> str | None:
    """Why `judgment` cannot be revised now, in the annotator's words; None when it can. `seen`:
    whether someone else has seen it, where the caller read it with its judgment
    (with_seen_by_others, as my_answers does for a whole page); looked up otherwise."""
    if not study.allow_revisions:
        return NOT_ALLOWED
    if study.kind == Study.Kind.PREFERENCE:
        return NOT_FOR_PREFERENCES
    if study.status != Study.Status.OPEN:
        return "this study is closed"
    if judgment.source != Judgment.Source.WEB:
        return "this answer was imported from a file, not given here"
    if seen_by_others(judgment) if seen is None else seen:
        return SEEN_BY_OTHERS
    return None


def my_answers(study: Study, annotator, page_number=1) -> tuple[list[dict], Page]:
    """One page of the annotator's answers in the study, newest first: the item as they read it
    (a one-line preview), their answer in words, when they gave it, how often they revised it,
    and whether (or why not) they may revise it now. Nothing about correctness or anyone else."""
    schema = study_schema(study) if study.kind != Study.Kind.PROXY else None
    # Whether others saw each answer and how many candidates its item has (for an answer stored
    # without the order it was shown in) come with the page's judgments, so a page costs the same
    # few statements however many rows it holds.
    judgments = (
        with_seen_by_others(own_judgments(study, annotator))
        .annotate(candidate_count=_CANDIDATE_COUNT)
        .select_related("item__query", "choice")
        .order_by("-submitted_at", "-pk")
    )
    page = Paginator(judgments, ANSWERS_PER_PAGE).get_page(page_number)
    rows = []
    for judgment in page:
        rows.append(
            {
                "item": judgment.item_id,
                "preview": preview(query_display_text(judgment.item.query, study.context_left, study.context_right)),
                "answer": answer_words(study, schema, shown_answer(study, judgment, judgment.candidate_count)),
                "answered_at": judgment.submitted_at,
                "revision": judgment.revision,
                "revised_at": judgment.revised_at,
                "refusal": revision_refusal(study, judgment, judgment.seen),
            }
        )
    return rows, page


_CANDIDATE_COUNT = Coalesce(
    Subquery(
        ItemCandidate.objects.filter(item_id=OuterRef("item_id"))
        .order_by()
        .values("item_id")
        .annotate(count=Count("pk"))
        .values("count")
    ),
    0,
)


def shown_answer(study: Study, judgment: Judgment, count: int | None = None) -> dict:
    """The judgment's answer (answer_fields, with `unsure`) in the places its annotator was shown
    the candidates: `position` and `selections` as they saw them (the order recorded with the
    judgment; else the order they are shown now, of `count` candidates), never the item's own
    order, which in a study shuffled per annotator would tell them nothing."""
    answer = {**answer_fields(judgment), "unsure": judgment.unsure}
    order = judgment.shown_order
    if order is None:
        total = judgment.item.candidates.count() if count is None else count
        order = shown_order(study, judgment.item_id, judgment.annotator_id, total)
    if answer["position"] is not None:
        answer["position"] = shown_position(order, answer["position"])
    if answer["selections"]:
        answer["selections"] = [shown_position(order, place) for place in answer["selections"]]
    return answer


def answer_words(study: Study, schema: dict | None, answer: dict) -> str:
    """An answer (shown_answer) as its annotator would say it: "option 2", "paragraphs 1, 3",
    "2 · Relevant"."""
    if study.kind == Study.Kind.PROXY:
        return "—" if answer["position"] is None else f"option {answer['position'] + 1}"
    if schema["multi_select"]:
        chosen = list(answer["selections"] or [])
        if not chosen:
            return "none selected"
        return f"paragraph{'s' if len(chosen) > 1 else ''} " + ", ".join(str(p + 1) for p in chosen)
    label = answer["label"]
    name = schema["value_labels"].get(str(label), str(label))
    return str(label) if name == str(label) else f"{label} · {name}"


def revision_payload(study: Study, judgment: Judgment) -> dict:
    """What the annotator revises: the item exactly as they are shown it (shown_item, in their own
    order), their current answer in those places (shown_answer), its revision number and whether
    it may be revised now. The REST view returns it as it is; the page lays it out."""
    shown = shown_item(judgment.item, judgment.annotator_id)
    return {
        **shown,
        "answer": shown_answer(study, judgment, len(shown["candidates"])),
        "revision": judgment.revision,
        "answered_at": judgment.submitted_at.isoformat(),
        "revised_at": judgment.revised_at.isoformat() if judgment.revised_at else None,
        "refusal": revision_refusal(study, judgment),
    }


def revise_judgment(judgment: Judgment, annotator, *, unsure: bool = False, **answer) -> Revision:
    """Replace the annotator's answer in `judgment` by a new one (the same arguments as
    submit_judgment's answer: candidate or position, label, spans, rubric, rationale,
    selections), keeping the replaced answer as a JudgmentRevision (see the module docstring).
    Refused with AnnotationForbidden (may not work here / study does not allow it), RevisionRefused
    (closed, imported, seen by others) or SubmissionRejected naming the field (a malformed answer)."""
    item: Item = judgment.item
    study = item.study
    if judgment.annotator_id != annotator.pk:
        raise AnnotationForbidden("this is not your answer")
    ensure_revisions_open(study, annotator)
    with transaction.atomic():
        # The item's lock orders us with a racing void, undo or adjudication, as undo's does.
        lock_rows(Item.objects.filter(pk=item.pk))
        current = Judgment.objects.select_for_update().filter(pk=judgment.pk).first()
        if current is None:
            raise RevisionRefused("this answer was taken back")
        refusal = revision_refusal(study, current)
        if refusal:
            raise RevisionRefused(refusal)
        # Read and checked exactly as a submission is: positions as this annotator was shown them.
        validated, _order = resolve_answer(item, annotator, **answer)
        fields = validated.judgment_fields()
        new = {
            "choice_id": fields["choice"].pk if fields["choice"] else None,
            **{key: fields[key] for key in ("label", "spans", "selections", "rubric", "rationale")},
            "unsure": bool(unsure),
        }
        if all(getattr(current, key) == new[key] for key in ANSWER_FIELDS):
            return Revision(current, created=False)
        now = timezone.now()
        JudgmentRevision.objects.create(
            judgment=current,
            number=current.revision,
            **{key: getattr(current, key) for key in ANSWER_FIELDS},
            answered_at=current.revised_at or current.submitted_at,
            replaced_by=annotator,
        )
        # The one sanctioned rewrite of an answer (Judgment.save refuses it): the earlier answer
        # is recorded above, in the same transaction.
        Judgment.objects.filter(pk=current.pk).update(**new, revision=F("revision") + 1, revised_at=now)
        refresh_live_counts(study, Item.objects.filter(pk=item.pk))  # the item's answers may agree now, or not
        current.refresh_from_db()
    return Revision(current, created=True)


LATEST_REVISION_RULE = "every figure reads each judgment's latest revision; earlier answers are kept apart"


def revision_summary(study: Study) -> dict:
    """What a report says about revisions: how many judgments were revised, how many earlier
    answers are kept, and the rule (statistics read the latest revision)."""
    return {
        "revised_judgments": Judgment.objects.filter(item__study=study, revision__gt=1).count(),
        "earlier_answers": JudgmentRevision.objects.filter(judgment__item__study=study).count(),
        "rule": LATEST_REVISION_RULE,
    }
