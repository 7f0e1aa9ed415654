"""The data manager's reads of a study's items: the table with its filters, sort, search and
jump, one page of rows, and an item's full detail. Staff only: rows show gold, provenance and
who answered. The pages (console/views/data_manager.py) and REST (console/data_api.py) call
these same functions.

Designed for 100K-item studies: the filters are EXISTS and correlated counts over indexed
columns in one statement, the page is cut by the database (LIMIT/OFFSET in study order, or in
the chosen sort), and only the page's rows are then read in full (one statement per kind of
row, over the page's ids). No statement lists every item's id, and nothing is read per row."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict

from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import Count, Exists, F, Max, OuterRef, Q, QuerySet, Subquery, TextField
from django.db.models.functions import Cast

from annotation.label_schema import matches_expected, study_schema
from annotation.models import (
    Adjudication,
    Item,
    ItemFlag,
    Judgment,
    JudgmentRevision,
    PeerReview,
    Rework,
    Study,
)
from annotation.selectors import preview, query_display_text, span_target_text
from annotation.services.adjudication import rework_payload
from annotation.services.live_counts import agreement_column
from annotation.services.quality import adjudication_payload
from annotation.ui_selectors import describe_answer
from console.data_filters import (
    YES_NO,
    TableFilters,
    choice,
    page_number,
    per_page,
    text,
    whole_number,
)
from judges.models import Judge, JudgeAnswer
from retrieval.errors import InputError

ITEM_STATUSES = ("unjudged", "partial", "complete")
AGREEMENTS = ("unanimous", "split", "none")
# Each sort and how the page names it.
ITEM_SORTS = {
    "position": "study order",
    "-position": "study order, last first",
    "judgments": "fewest live judgments first",
    "-judgments": "most live judgments first",
    "answered": "answered longest ago first",
    "-answered": "answered most recently first",
}


# --- reading the table's parameters ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ItemFilters(TableFilters):
    """What the items table shows: `status` by live (not voided) judgments against the judgments
    per item (unjudged 0, partial, complete); `agreement` among an item's live answers when it has
    at least two (unanimous: all alike, none: all different, split: between); `flagged` (an
    annotator flagged it), `annotator` (judged by them, voided judgments included), `judge` (a
    judge of that name gave a readable answer), `adjudicated`, `role`; `search` in the query's
    external id, text and context sentences; `sort` (ITEM_SORTS, default study order)."""

    status: str = ""
    agreement: str = ""
    flagged: str = ""
    annotator: str = ""
    judge: str = ""
    adjudicated: str = ""
    role: str = ""


def item_filters(params) -> ItemFilters:
    """The items table's filters from request parameters; InputError naming a bad one."""
    filters = ItemFilters(
        status=choice(params, "status", ITEM_STATUSES),
        agreement=choice(params, "agreement", AGREEMENTS),
        flagged=choice(params, "flagged", YES_NO),
        annotator=text(params, "annotator", 150),
        judge=text(params, "judge", 100),
        adjudicated=choice(params, "adjudicated", YES_NO),
        role=choice(params, "role", tuple(Item.Role.values)),
        search=text(params, "search"),
        sort=choice(params, "sort", tuple(ITEM_SORTS)),
    )
    if filters.annotator and not get_user_model().objects.filter(username=filters.annotator).exists():
        raise InputError(f"nobody is called {filters.annotator!r}", field="annotator")
    if filters.judge and not Judge.objects.filter(name=filters.judge).exists():
        raise InputError(f"no judge is called {filters.judge!r}", field="judge")
    return filters


# --- the filtered, sorted items --------------------------------------------------------------------


NO_PREFERENCE_AGREEMENT = "a preference study's answers are compared in its preference report, not here"


def ensure_comparable(study: Study) -> None:
    """Preference answers (an order of the candidates as each annotator saw them) are not compared
    item by item here: InputError naming `agreement`."""
    if agreement_column(study) is None:
        raise InputError(NO_PREFERENCE_AGREEMENT, field="agreement")


def search_condition(term: str, prefix: str = "") -> Q:
    """A query's external id, text or any of its context sentences containing `term` (case-blind
    for ASCII letters, as the database's LIKE is). Context sentences are JSON lists, searched as
    the database writes them out: SQLite stores non-ASCII characters \\u-escaped, Postgres' jsonb
    as they are, so the term is written the same way."""
    written = json.dumps(term, ensure_ascii=connection.vendor != "postgresql")[1:-1]
    return (
        Q(**{f"{prefix}external_id__icontains": term})
        | Q(**{f"{prefix}text__icontains": term})
        | Q(**{f"{prefix}left_text__icontains": written})
        | Q(**{f"{prefix}right_text__icontains": written})
    )


def with_context_text(queryset: QuerySet, prefix: str = "") -> QuerySet:
    """`queryset` with its query's context lists cast to text (search_condition reads them)."""
    return queryset.alias(
        **{
            f"{prefix}left_text": Cast(f"{prefix}left_context", TextField()),
            f"{prefix}right_text": Cast(f"{prefix}right_context", TextField()),
        }
    )


def filtered_items(study: Study, filters: ItemFilters) -> QuerySet[Item]:
    """The study's items the filters keep, in the sort asked (ties and the default: study order).
    Each filter adds one condition, evaluated by the database per item over indexed columns; status
    and agreement read the item's stored live counts (annotation.services.live_counts)."""
    items = Item.objects.filter(study=study)
    needed = study.judgments_per_item
    if filters.status == "unjudged":
        items = items.filter(live_judgments=0)
    elif filters.status == "partial":
        items = items.filter(live_judgments__gt=0, live_judgments__lt=needed)
    elif filters.status == "complete":
        items = items.filter(live_judgments__gte=needed)
    if filters.agreement:
        ensure_comparable(study)
        items = items.filter(live_judgments__gte=2)
        items = {
            "unanimous": items.filter(live_answers=1),
            "split": items.filter(live_answers__gt=1, live_answers__lt=F("live_judgments")),
            "none": items.filter(live_answers=F("live_judgments")),
        }[filters.agreement]
    if filters.flagged:
        flagged = Exists(ItemFlag.objects.filter(item=OuterRef("pk")))
        items = items.filter(flagged if filters.flagged == "yes" else ~flagged)
    if filters.adjudicated:
        decided = Exists(Adjudication.objects.filter(item=OuterRef("pk")))
        items = items.filter(decided if filters.adjudicated == "yes" else ~decided)
    if filters.annotator:
        items = items.filter(
            Exists(Judgment.objects.filter(item=OuterRef("pk"), annotator__username=filters.annotator))
        )
    if filters.judge:
        answered = JudgeAnswer.objects.filter(item=OuterRef("pk"), judge__name=filters.judge, parsed__isnull=False)
        items = items.filter(Exists(answered))
    if filters.role:
        items = items.filter(role=filters.role)
    if filters.search:
        items = with_context_text(items, "query__").filter(search_condition(filters.search, "query__"))
    return _sorted(items, filters.sort)


def _sorted(items: QuerySet[Item], sort: str) -> QuerySet[Item]:
    descending = sort.startswith("-")
    if sort in ("judgments", "-judgments"):
        return items.order_by("-live_judgments" if descending else "live_judgments", "position")
    if sort in ("answered", "-answered"):
        answered = Judgment.objects.filter(item=OuterRef("pk")).order_by().values("item")
        items = items.alias(answered=Subquery(answered.annotate(at=Max("submitted_at")).values("at")[:1]))
        last = F("answered").desc(nulls_last=True) if descending else F("answered").asc(nulls_last=True)
        return items.order_by(last, "position")
    return items.order_by("-position" if descending else "position")


# --- one page of rows --------------------------------------------------------------------------------


def answer_key(study: Study, schema: dict, position, label, selections):
    """What two answers share when they agree (agreement_column's value, read back in Python); None
    for a preference answer, which is not compared here (agreement_of then says nothing). `schema`
    is study_schema(study), read once by the caller rather than once per answer."""
    if study.kind == Study.Kind.PREFERENCE:
        return None
    if study.kind == Study.Kind.PROXY:
        return position
    return tuple(selections or ()) if schema["multi_select"] else label


def agreement_of(keys: list) -> str | None:
    """unanimous / split / none among an item's live answers, None under two answers or for
    answers that are not compared (answer_key None)."""
    if len(keys) < 2 or None in keys:
        return None
    distinct = len(set(keys))
    return "unanimous" if distinct == 1 else "none" if distinct == len(keys) else "split"


def item_table(study: Study, params) -> dict:
    """The items table for request parameters: the filters read (InputError on a bad one), one
    page of rows and the page (for the pager: `page.paginator.count` rows match)."""
    filters = item_filters(params)
    items = filtered_items(study, filters).values_list("pk", flat=True)
    page = Paginator(items, per_page(params)).get_page(page_number(params))
    return {"filters": filters, "rows": item_rows(study, list(page)), "page": page}


def item_rows(study: Study, item_ids: list[int]) -> list[dict]:
    """The rows of these items, in this order: position, query and what annotators read, role,
    live and voided judgments against the judgments per item, each answer (who, what, voided,
    revision), agreement, flags, adjudication, the gold's option and the last answer's time."""
    schema = study_schema(study)
    items = {item.pk: item for item in Item.objects.filter(pk__in=item_ids).select_related("query")}
    answers = defaultdict(list)
    judgments = (
        Judgment.objects.filter(item_id__in=item_ids)
        .order_by("submitted_at", "pk")
        .values_list(
            "item_id",
            "pk",
            "annotator__username",
            "choice__position",
            "label",
            "selections",
            "voided",
            "revision",
            "submitted_at",
        )
    )
    for item_id, pk, annotator, position, label, selections, voided, revision, submitted in judgments:
        answers[item_id].append(
            {
                "judgment": pk,
                "annotator": annotator,
                "answer": describe_answer(study, schema, position=position, label=label, selections=selections),
                "key": answer_key(study, schema, position, label, selections),
                "voided": voided,
                "revision": revision,
                "submitted_at": submitted,
            }
        )
    flags = dict(
        ItemFlag.objects.filter(item_id__in=item_ids)
        .order_by()
        .values("item_id")
        .annotate(n=Count("pk"))
        .values_list("item_id", "n")
    )
    decided = set(Adjudication.objects.filter(item_id__in=item_ids).values_list("item_id", flat=True))
    gold = dict(
        Item.objects.filter(pk__in=item_ids, candidates__is_gold=True).values_list("pk", "candidates__position")
    )
    rows = []
    for item_id in item_ids:
        item, given = items[item_id], answers[item_id]
        live = [answer for answer in given if not answer["voided"]]
        rows.append(
            {
                "item": item_id,
                "position": item.position,
                "number": item.position + 1,
                "query": item.query.external_id,
                "preview": preview(query_display_text(item.query, study.context_left, study.context_right)),
                "role": item.role,
                "judgments": len(live),
                "needed": study.judgments_per_item,
                "voided": len(given) - len(live),
                "answers": [{key: value for key, value in answer.items() if key != "key"} for answer in given],
                "agreement": agreement_of([answer["key"] for answer in live]),
                "flags": flags.get(item_id, 0),
                "adjudicated": item_id in decided,
                "gold_position": gold.get(item_id),
                "last_answered": max((answer["submitted_at"] for answer in given), default=None),
            }
        )
    return rows


# --- jump ------------------------------------------------------------------------------------------

JUMP_BY = {"position": "position", "item": "item id"}


def jump_target(study: Study, params) -> Item:
    """The item `jump` names: its position as the table numbers it (from 1), or with
    `jump_by=item` its id. InputError naming `jump` when the study has no such item."""
    by = choice(params, "jump_by", tuple(JUMP_BY)) or "position"
    number = whole_number(params, "jump", low=1)
    if number is None:
        raise InputError("give a position or an item id", field="jump")
    found = Item.objects.filter(study=study, **({"pk": number} if by == "item" else {"position": number - 1})).first()
    if found is None:
        noun = f"item {number}" if by == "item" else f"item at position {number}"
        raise InputError(f"this study has no {noun}", field="jump")
    return found


# --- an item's detail ------------------------------------------------------------------------------


def item_detail(study: Study, item: Item) -> dict:
    """Everything about one item, for staff: what annotators read, the candidates with gold and
    provenance, every judgment (voided ones too) with its seconds, rationale, spans and their
    excerpts, rubric, its earlier answers when revised, who voided it and why (a send-back names
    its rework), its peer reviews; the flags annotators raised, the adjudication (read through
    annotation.services.quality.adjudication_payload), every time it was sent back (from here or
    the adjudication workspace: the same Rework records), the judges' answers, and the items
    before and after it in study order."""
    schema = study_schema(study)
    candidates = [
        {
            "candidate": candidate.pk,
            "position": candidate.position,
            "passage": candidate.passage.external_id,
            "title": candidate.passage.title,
            "text": candidate.passage.text,
            "is_gold": candidate.is_gold,
            "source_run": candidate.source_run_id,
            "source_rank": candidate.source_rank,
        }
        for candidate in item.candidates.select_related("passage").order_by("position")
    ]
    gold = next((entry["position"] for entry in candidates if entry["is_gold"]), None)
    reworks = list(Rework.objects.filter(item=item).select_related("sent_by").order_by("sent_at", "pk"))
    sent_back_by = {judgment: rework.pk for rework in reworks for judgment in rework.judgments}
    judgments = [
        _judgment_entry(study, schema, item, judgment, gold, sent_back_by.get(judgment.pk))
        for judgment in Judgment.objects.filter(item=item)
        .select_related("annotator", "choice", "voided_by")
        .order_by("submitted_at", "pk")
    ]
    live = [entry for entry in judgments if not entry["voided"]]
    adjudication = Adjudication.objects.filter(item=item).select_related("choice", "decided_by").first()
    decision = adjudication_payload(adjudication)
    if decision is not None:
        decision["answer"] = describe_answer(
            study, schema, position=decision["position"], label=decision["label"], selections=decision["selections"]
        )
    neighbours = Item.objects.filter(study=study)
    return {
        "item": item.pk,
        "position": item.position,
        "number": item.position + 1,
        "role": item.role,
        "expected": item.expected_label,
        "query": item.query.external_id,
        "text": query_display_text(item.query, study.context_left, study.context_right),
        "candidates": candidates,
        "gold_position": gold,
        "needed": study.judgments_per_item,
        "judgments_live": len(live),
        "agreement": agreement_of(
            [answer_key(study, schema, entry["position"], entry["label"], entry["selections"]) for entry in live]
        ),
        "judgments": judgments,
        "flags": [
            {"annotator": flag.annotator.username, "reason": flag.reason, "created_at": flag.created_at}
            for flag in ItemFlag.objects.filter(item=item).select_related("annotator").order_by("created_at", "pk")
        ],
        "adjudication": decision,
        "reworks": [{"rework": rework.pk, **rework_payload(rework)} for rework in reworks],
        "judge_answers": _judge_answers(study, schema, item),
        "previous": neighbours.filter(position__lt=item.position)
        .order_by("-position")
        .values_list("pk", flat=True)
        .first(),
        "next": neighbours.filter(position__gt=item.position).order_by("position").values_list("pk", flat=True).first(),
    }


def _judgment_entry(
    study: Study, schema: dict, item: Item, judgment: Judgment, gold: int | None, rework: int | None
) -> dict:
    """One judgment of the item's detail; `rework`: the send-back that voided it, if one did."""
    position = judgment.choice.position if judgment.choice else None
    if study.kind == Study.Kind.PROXY:
        correct = None if gold is None else position == gold
    else:
        correct = (
            None
            if item.expected_label is None
            else matches_expected(item.expected_label, label=judgment.label, selections=judgment.selections)
        )
    texts: dict[str, str] = {}

    def excerpt(span: dict) -> str:
        if span["target"] not in texts:
            texts[span["target"]] = span_target_text(study, item, span["target"])
        return texts[span["target"]][span["start"] : span["end"]]

    return {
        "judgment": judgment.pk,
        "annotator": judgment.annotator.username,
        "answer": describe_answer(
            study, schema, position=position, label=judgment.label, selections=judgment.selections
        ),
        "position": position,
        "label": judgment.label,
        "selections": judgment.selections,
        "correct": correct,
        "seconds": judgment.seconds,
        "server_seconds": judgment.server_seconds,
        "unsure": judgment.unsure,
        "rationale": judgment.rationale,
        "spans": [{**span, "text": excerpt(span)} for span in judgment.spans],
        "rubric": judgment.rubric,
        "submitted_at": judgment.submitted_at,
        "source": judgment.source,
        "revision": judgment.revision,
        "revised_at": judgment.revised_at,
        "earlier_answers": [
            {
                "number": earlier.number,
                "answer": describe_answer(
                    study,
                    schema,
                    position=earlier.choice.position if earlier.choice else None,
                    label=earlier.label,
                    selections=earlier.selections,
                ),
                "rationale": earlier.rationale,
                "spans": [{**span, "text": excerpt(span)} for span in earlier.spans],
                "rubric": earlier.rubric,
                "unsure": earlier.unsure,
                "answered_at": earlier.answered_at,
                "replaced_at": earlier.replaced_at,
                "replaced_by": earlier.replaced_by.username if earlier.replaced_by else None,
            }
            for earlier in JudgmentRevision.objects.filter(judgment=judgment).select_related("choice", "replaced_by")
        ],
        "voided": judgment.voided,
        "void_reason": judgment.void_reason,
        "voided_by": judgment.voided_by.username if judgment.voided_by else None,
        "voided_at": judgment.voided_at,
        "rework": rework,
        "peer_reviews": [
            {
                "reviewer": review.reviewer.username,
                "verdict": review.verdict,
                "comment": review.comment,
                "reviewed_at": review.reviewed_at,
            }
            for review in PeerReview.objects.filter(judgment=judgment).select_related("reviewer").order_by("pk")
        ],
    }


def _judge_answers(study: Study, schema: dict, item: Item) -> list[dict]:
    """Every answer a judge stored for the item (all versions and samples), in words."""
    answers = JudgeAnswer.objects.filter(item=item).select_related("judge")
    return [
        {
            "judge": answer.judge.name,
            "version": answer.judge.version,
            "sample": answer.sample,
            "answer": _judge_words(study, schema, answer.parsed),
            "failure_reason": answer.failure_reason,
        }
        for answer in answers.order_by("judge__name", "-judge__version", "sample")
    ]


def _judge_words(study: Study, schema: dict, parsed: dict | None) -> str | None:
    if parsed is None:
        return None
    if "score" in parsed:
        return f"score {parsed['score']}"
    return describe_answer(study, schema, position=parsed.get("position"), label=parsed.get("label"))


def item_of(study: Study, item_id: int) -> Item | None:
    """The study's item `item_id` with its query, or None."""
    return Item.objects.filter(study=study, pk=item_id).select_related("query").first()


def selected_items(study: Study, params, *, ids: list[int] | None) -> QuerySet[Item]:
    """What a bulk action acts on: the items chosen by hand (`ids`), or with ids None every item
    the filters in `params` keep (at any count: a subquery, never a list)."""
    if ids is not None:
        return Item.objects.filter(study=study, pk__in=ids)
    return filtered_items(study, item_filters(params)).order_by()


def bulk_annotator(params):
    """The annotator a bulk void is narrowed to: the table's annotator filter, if set."""
    name = text(params, "annotator", 150)
    return get_user_model().objects.filter(username=name).first() if name else None
