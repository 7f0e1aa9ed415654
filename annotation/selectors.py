"""What the annotation app reads back: annotator-facing payloads, staff exports, and the
judgments that statistics count.

Annotator-facing functions build their dictionaries from an explicit list of fields (candidate
id, position, text) and never touch `is_gold`, `source_run`, `source_rank`, passage or query
external ids (BIRCO's WhatsThatBook ids give the answer away), nor anyone else's answers.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from django.db.models import Count, Expression, F, Q, QuerySet

from retrieval.models import Query, Run

from . import hot_queries
from .label_schema import matches_expected, study_schema
from .models import (
    Assignment,
    Item,
    ItemCandidate,
    ItemFlag,
    Judgment,
    Pool,
    PooledPair,
    PoolHit,
    PreferenceQuery,
    Study,
    StudyBlock,
)
from .post_editing import has_post_editing, proposal_payload
from .presentation import shown_order, shown_position, study_keys


def context_sentences(query: Query, context_left: int, context_right: int) -> tuple[list[str], list[str]]:
    """The sentences shown around the masked quotation: the last L of the left context and the
    first R of the right one."""
    left = list(query.left_context)[-context_left:] if context_left else []
    return left, list(query.right_context)[:context_right]


def shown_context(query: Query, context_left: int, context_right: int) -> list[str]:
    """Everything the annotator reads besides the candidates; a query without context (BEIR,
    whose text already holds the "[masked sentence(s)]") shows its own text."""
    if not query.has_context:
        return [query.text]
    left, right = context_sentences(query, context_left, context_right)
    return [*left, *right]


# Where the masked quotation sits when a context is written out as one text.
MASK_MARK = "[...]"


def query_display_text(query: Query, context_left: int, context_right: int) -> str:
    """The query as one text, as label studies show it and as query spans index into it: its own
    text, or the shown context sentences joined by spaces with MASK_MARK where the quotation was
    (left context only, as in quote recommendation, ends without a mark)."""
    if not query.has_context:
        return query.text
    left, right = context_sentences(query, context_left, context_right)
    parts = [" ".join(left)] if left else []
    if right:
        parts += [MASK_MARK, " ".join(right)]
    return " ".join(parts)


PREVIEW_CHARACTERS = 160


def preview(text: str) -> str:
    """A text cut to one short line (a table cell, a list of answers): at most PREVIEW_CHARACTERS,
    an ellipsis where it was cut. The one cut-off of every staff and annotator listing."""
    return text if len(text) <= PREVIEW_CHARACTERS else text[: PREVIEW_CHARACTERS - 1] + "…"


def span_target_text(study: Study, item: Item, target: str, shown: Sequence[ItemCandidate] | None = None) -> str:
    """The exact text whose character offsets a span of `target` ("query" or "passage") counts:
    the query as shown, or the first candidate's passage (from `shown`, the candidates in display
    order, when the caller has them)."""
    if target == "query":
        return query_display_text(item.query, study.context_left, study.context_right)
    if shown is not None:
        return shown[0].passage.text
    return ItemCandidate.objects.filter(item=item).order_by("position").values_list("passage__text", flat=True)[0]


def counted_judgments(study: Study) -> QuerySet[Judgment]:
    """The judgments statistics use: judgments of the study's work items that staff have not
    voided, leaving out annotators blocked from the study with their judgments excluded.
    Hidden gold judgments measure annotators (`gold_judgments`), they are not data; qualification
    answers are never judgments at all."""
    return (
        _live_judgments(study, Item.Role.WORK)
        .exclude(annotator__in=_excluded_annotators(study))
        .select_related("item", "annotator", "choice")
        .order_by("item__position", "annotator__username")
    )


def counted_judgments_by_copies(study: Study) -> QuerySet[Judgment]:
    """counted_judgments' rows (unordered, nothing joined), filtered on each judgment's copy of its
    item's study and role (Judgment.study, Judgment.item_role), which the staff pages' indexes
    lead with: for passes over the whole study (per-annotator counts and medians). Not for reading
    a few items' judgments: SQLite, without table statistics, then prefers those indexes to the
    item's and a page of 100 disputed items read 300K index entries (counted_judgments joins)."""
    live = Judgment.objects.filter(study=study, item_role=Item.Role.WORK, voided=False)
    return live.exclude(annotator__in=_excluded_annotators(study))


def _excluded_annotators(study: Study) -> QuerySet:
    return StudyBlock.objects.filter(study=study, exclude_judgments=True).values("annotator")


def gold_judgments(study: Study) -> QuerySet[Judgment]:
    """Judgments of the study's hidden gold items that staff have not voided, blocked annotators'
    included: they say how reliable each annotator is, whether or not their work is counted."""
    return (
        _live_judgments(study, Item.Role.GOLD)
        .select_related("item", "annotator", "choice")
        .order_by("item__position", "annotator__username")
    )


def _live_judgments(study: Study, role: str) -> QuerySet[Judgment]:
    return Judgment.objects.filter(item__study=study, item__role=role, voided=False)


class Median(NamedTuple):
    value: float
    count: int  # the values it is the median of


def median_seconds(judgments: QuerySet[Judgment], seconds, count: int | None = None) -> Median | None:
    """The exact median of `seconds` (a column name or expression; nulls left out) over
    `judgments`, as statistics.median gives it, and how many values it is the median of (`count`
    where the caller counted them already); None without one. The database orders the values
    and hands back only the middle one or two (ORDER BY ... LIMIT 2 OFFSET (n - 1) // 2): reading
    every judgment's time into Python cost the staff pages a second at 100K items, and a
    window-function median is slower still on SQLite."""
    timed, seconds = _timed(judgments, seconds)
    count = timed.count() if count is None else count
    return Median(_middle(timed, seconds, count), count) if count else None


def median_seconds_by_annotator(judgments: QuerySet[Judgment], seconds, counts: dict[int, int]) -> dict[int, Median]:
    """median_seconds per annotator (annotator id -> Median), given `counts`, each annotator's
    judgments with a time (the callers count them in a grouped pass they make anyway)."""
    timed, seconds = _timed(judgments, seconds)
    return {
        annotator_id: Median(_middle(timed.filter(annotator_id=annotator_id), seconds, count), count)
        for annotator_id, count in counts.items()
        if count
    }


def _timed(judgments: QuerySet[Judgment], seconds) -> tuple[QuerySet[Judgment], F | Expression]:
    """The judgments with a time, and the time as an expression (a column name becomes F())."""
    seconds = F(seconds) if isinstance(seconds, str) else seconds
    return judgments.order_by().alias(timed_seconds=seconds).filter(timed_seconds__isnull=False), seconds


def _middle(timed: QuerySet[Judgment], seconds, count: int) -> float:
    """statistics.median of the `count` timed values: the middle one, or the mean of the two."""
    first = (count - 1) // 2
    values = list(timed.order_by("timed_seconds").values_list(seconds, flat=True)[first : first + 2 - count % 2])
    return values[0] if count % 2 else (values[0] + values[1]) / 2


def studies_open_to(annotator) -> QuerySet[Study]:
    """Open studies granted to this annotator (an invitation, a crowd link), and unless the
    account works on its granted studies only, those that list them or list nobody (open to
    every annotator)."""
    access = Q(grants__annotator=annotator)
    if not works_on_granted_studies_only(annotator):
        access |= Q(annotators=None) | Q(annotators=annotator)
    return Study.objects.filter(status=Study.Status.OPEN).filter(access).distinct().order_by("name")


def works_on_granted_studies_only(annotator) -> bool:
    """Whether the account is scoped to the studies granted to it (invited accounts until staff
    widen them, crowd participants)."""
    profile = getattr(annotator, "annotator_profile", None)
    return profile is not None and profile.only_granted


def annotator_progress(study: Study, annotator) -> dict:
    """How many of the study's items this annotator has judged, out of all its formal items
    (work and hidden gold alike; qualification questions are a round of their own), or out of
    their item limit (the study's per-annotator cap, their own quota) when that is smaller.
    Someone who judged more than a limit lowered since then counts as finished, never as
    "29 / 10"."""
    # One statement for all counts (annotation.hot_queries): it runs on every item served.
    done, total, quota = hot_queries.progress_counts(study.pk, getattr(annotator, "pk", annotator))
    limit = item_limit(study.max_items_per_annotator, quota)
    if limit is not None:
        total = max(min(total, limit), min(done, total))
    return {"done": done, "total": total}


def item_limit(cap: int | None, quota: int | None) -> int | None:
    """The smaller of the study's per-annotator cap and the account's own quota there (a crowd
    participant's link quota), either of which may be absent."""
    return min((limit for limit in (cap, quota) if limit is not None), default=None)


def shown_item(item: Item, annotator_id: int | None = None) -> dict:
    """An item as every annotator sees it, whatever it is for (formal work, hidden gold, a
    qualification question, a judgment to peer-review): candidates in the order shown with
    opaque ids, the context (or the query's own text), the guidelines and the page's keys. Built
    from an explicit list of fields and never from the item's role, so hidden gold cannot show
    through. In a study that shuffles candidates per annotator, `annotator_id`'s own order
    (annotation.presentation); `position` is always the place shown (0, 1, ...), the number an
    answer by position gives back."""
    study, query = item.study, item.query
    rows = list(
        ItemCandidate.objects.filter(item=item)
        .order_by("position")
        .values_list("pk", "passage__title", "passage__text", "passage__document_id")
    )
    order = shown_order(study, item.pk, annotator_id, len(rows))
    candidates = [
        {"id": rows[position][0], "position": place, "title": rows[position][1], "text": rows[position][2]}
        for place, position in enumerate(order)
    ]
    left, right = context_sentences(query, study.context_left, study.context_right)
    return {
        "study": study.pk,
        "study_name": study.name,
        "kind": study.kind,
        "guidelines": study.guidelines,
        "item": item.pk,
        "candidates": candidates,
        "keys": study_keys(study),
        "auto_advance": study.auto_advance,
        "context_left": left,
        "context_right": right,
        "query_text": "" if query.has_context else query.text,
        # "More context" is offered where the study allows it and every candidate lies in a book.
        "more_context": study.more_context and all(document is not None for *_, document in rows),
        **_label_task(study, item),
    }


def _label_task(study: Study, item: Item) -> dict:
    """What a relevance or quotability item asks, from the study's schema (nothing for proxy
    items; a preference item says its shape, question and whether ties and "both bad" are
    answers): the question, the values with their display names, the span target with the exact
    text its offsets count, the rubric fields, the rationale mode, whether several candidates
    may be selected, and the article title a quotability context comes from."""
    if study.kind == Study.Kind.PROXY:
        return {}
    schema = study_schema(study)
    if study.kind == Study.Kind.PREFERENCE:
        return {"preference": {key: schema[key] for key in ("shape", "question", "ties", "bad")}}
    metadata = item.query.metadata if isinstance(item.query.metadata, dict) else {}
    target = schema["spans"]
    return {
        "query_title": str(metadata.get("title", "")),
        "question": schema["question"],
        "values": _named_values(schema["values"], schema["value_labels"]),
        "multi_select": schema["multi_select"],
        "spans": None
        if target is None
        else {
            "target": target,
            "required": schema["spans_required"],
            "text": span_target_text(study, item, target),
        },
        "rubric": [
            {"name": entry["name"], "values": _named_values(entry["values"], entry["labels"])}
            for entry in schema["rubric"]
        ],
        "rationale": schema["rationale"],
    }


def _named_values(values: list[int], names: dict[str, str]) -> list[dict]:
    return [{"value": value, "label": names[str(value)]} for value in values]


def annotator_item_payload(assignment: Assignment) -> dict:
    """What the annotator sees for a claimed item: the item as shown, when their claim expires
    and their progress; in a post-editing study also the proposal shown pre-selected (never
    who proposed it: annotation.post_editing)."""
    item = shown_item(assignment.item, assignment.annotator_id)
    return {
        "finished": False,
        **item,
        **proposal_payload(assignment.item, assignment.annotator_id, len(item["candidates"])),
        "expires_at": assignment.expires_at.isoformat(),
        "progress": annotator_progress(assignment.item.study, assignment.annotator_id),
    }


def finished_payload(study: Study, annotator) -> dict:
    """Nothing (more) to do for this annotator in this study right now. `more_coming`: an
    adaptive preference study adds pairs as answers land, so there may be work again soon."""
    more_coming = (
        study.kind == Study.Kind.PREFERENCE
        and study.status == Study.Status.OPEN
        and PreferenceQuery.objects.filter(study=study, status=PreferenceQuery.Status.OPEN).exists()
    )
    return {
        "more_coming": more_coming,
        "finished": True,
        "study": study.pk,
        "study_name": study.name,
        "kind": study.kind,
        "guidelines": study.guidelines,
        "item": None,
        "keys": study_keys(study),
        "progress": annotator_progress(study, annotator),
    }


def study_overview(study: Study) -> dict:
    """Staff-facing counts: items, judgments counted and voided (and those marked unsure), flags
    annotators raised on items, claims in progress."""
    # One pass over the study's judgments for the three counts (at 100K items, 300K rows each), in
    # an index that holds every column they read (Judgment.Meta.indexes).
    counts = Judgment.objects.filter(study=study).aggregate(
        counted=Count("pk", filter=Q(voided=False)),
        voided_count=Count("pk", filter=Q(voided=True)),
        unsure_count=Count("pk", filter=Q(voided=False, unsure=True)),
    )
    return {
        "items": study.items.count(),
        "judgments": counts["counted"],
        "voided": counts["voided_count"],
        "unsure": counts["unsure_count"],
        "item_flags": ItemFlag.objects.filter(item__study=study).count(),
        "active_claims": Assignment.objects.filter(item__study=study, state=Assignment.State.ACTIVE).count(),
        "complete_items": study.items.annotate(
            live=Count("assignments", filter=Q(assignments__state=Assignment.State.SUBMITTED))
        )
        .filter(live__gte=study.judgments_per_item)
        .count(),
    }


EXPORT_CHUNK = 2000  # rows fetched per round trip by the streaming exports


def study_export_rows(study: Study) -> Iterator[dict]:
    """Staff export, one row per item in study order: the query, candidates (passage external
    ids in display order), the gold candidate (proxy items), where each candidate came from
    (its best source), the item's role and its expected answer (gold and qualification items of
    label kinds), and for label items every source that found the pair (a relevance study's
    pool, a quotability study's parameters).

    Streams at any study size: items and candidates come as two cursors in the same order and
    are merged here, so memory holds one chunk and no query lists every item's id (SQLite
    refuses such a list beyond about a thousand ids: "Expression tree is too large")."""
    pooled = pair_sources(study) if study.kind == Study.Kind.RELEVANCE else iter(())
    all_sources = (study.parameters or {}).get("sources", {})
    next_pooled = next(pooled, None)
    items = (
        Item.objects.filter(study=study)
        .order_by("position", "id")
        .values_list("id", "query__external_id", "role", "expected_label")
        .iterator(EXPORT_CHUNK)
    )
    candidates = (
        ItemCandidate.objects.filter(item__study=study)
        .order_by("item__position", "item_id", "position")
        .values_list("item_id", "passage__external_id", "is_gold", "source_run_id", "source_rank")
        .iterator(EXPORT_CHUNK)
    )
    pending = next(candidates, None)
    for item_id, query, role, expected in items:
        shown = []
        while pending is not None and pending[0] == item_id:
            shown.append(pending)
            pending = next(candidates, None)
        row = {
            "item": item_id,
            "query": query,
            "candidates": [passage for _, passage, _, _, _ in shown],
            "gold": next((passage for _, passage, is_gold, _, _ in shown if is_gold), None),
            "sources": {passage: {"run": run, "rank": rank} for _, passage, _, run, rank in shown},
            "role": role,
        }
        if study.kind != Study.Kind.PROXY:
            row["expected"] = expected
            row["all_sources"] = all_sources.get(str(item_id), [])
            if next_pooled is not None and next_pooled[0] == item_id:
                row["all_sources"] = next_pooled[1]
                next_pooled = next(pooled, None)
        yield row


JUDGMENT_COLUMNS = (
    "judgment",
    "study",
    "item",
    "role",
    "query",
    "annotator",
    "candidate",
    "choice",
    "position",
    "label",
    "spans",
    "rubric",
    "rationale",
    "selections",
    "unsure",
    "correct",
    "seconds",
    "server_seconds",
    "submitted_at",
    "source",
    "voided",
    "void_reason",
    "shown_order",
    "revision",
    "revised_at",
)
# A post-editing study's judgments add these (annotation.post_editing): whether a proposal was
# shown pre-selected, and whether the answer kept it.
POST_EDITING_COLUMNS = ("proposal_shown", "proposal_kept")
# Columns holding lists or objects: written as JSON in the CSV export.
JSON_JUDGMENT_COLUMNS = ("label", "spans", "rubric", "selections", "shown_order")


# What judgment_rows reads of a judgment, its item, query, annotator and chosen candidate: plain
# values (dicts) from one joined cursor (a model instance per row cost most of a 100K-item export).
_JUDGMENT_VALUES = (
    "pk",
    "item_id",
    "item__role",
    "item__query__external_id",
    "annotator__username",
    "choice_id",
    "choice__passage__external_id",
    "choice__position",
    "choice__is_gold",
    "item__expected_label",
    "label",
    "spans",
    "rubric",
    "rationale",
    "selections",
    "unsure",
    "seconds",
    "server_seconds",
    "submitted_at",
    "source",
    "voided",
    "void_reason",
    "shown_order",
    "revision",
    "revised_at",
)


def judgment_rows(study: Study, items: QuerySet[Item] | None = None) -> Iterator[dict]:
    """Staff export, one flat row per judgment (voided ones included and flagged): `candidate`
    is the opaque candidate id, `choice` the chosen passage's external id (the same key
    import_judgments reads), `position` its 0-based item position; label kinds fill `label`
    (or `selections`, item positions), `spans`, `rubric` and `rationale`. `shown_order`: the
    item positions in the order the annotator saw them (null where not recorded), so the
    position shown of a choice is shown_order.index(position). `correct`: whether
    the answer matches the item's known answer (the gold candidate, or a gold or qualification
    item's expected label), None where there is none. `role` tells hidden gold judgments apart;
    `unsure` is the annotator's own "I am guessing" mark; a post-editing study's rows add
    `proposal_shown` and `proposal_kept` (POST_EDITING_COLUMNS). Each row is the judgment's
    latest answer: `revision` says which (1 = never revised, annotation.services.revisions) and
    `revised_at` when it was given (null for a first answer).
    `items` (a queryset of the study's items: the data manager's selection) narrows the rows to
    those items' judgments, through a subquery at any size.
    A generator over one joined cursor of values, EXPORT_CHUNK rows a round trip: the exports
    stream it at any study size, and no model instance is built per row."""
    post_editing = has_post_editing(study)
    judgments = Judgment.objects.filter(item__study=study)
    if items is not None:
        judgments = judgments.filter(item__in=items.values("pk"))
    judgments = judgments.order_by("item__position", "submitted_at", "pk").values(
        *_JUDGMENT_VALUES, *(POST_EDITING_COLUMNS if post_editing else ())
    )
    for j in judgments.iterator(EXPORT_CHUNK):
        row = {
            "judgment": j["pk"],
            "study": study.pk,
            "item": j["item_id"],
            "role": j["item__role"],
            "query": j["item__query__external_id"],
            "annotator": j["annotator__username"],
            "candidate": j["choice_id"],
            "choice": j["choice__passage__external_id"],
            "position": j["choice__position"],
            "label": j["label"],
            "spans": j["spans"],
            "rubric": j["rubric"],
            "rationale": j["rationale"],
            "selections": j["selections"],
            "unsure": j["unsure"],
            "correct": _judgment_correct(j),
            "seconds": j["seconds"],
            "server_seconds": j["server_seconds"],
            "submitted_at": j["submitted_at"].isoformat(),
            "source": j["source"],
            "voided": j["voided"],
            "void_reason": j["void_reason"],
            "shown_order": j["shown_order"],
            "revision": j["revision"],
            "revised_at": j["revised_at"].isoformat() if j["revised_at"] else None,
        }
        if post_editing:
            row.update({key: j[key] for key in POST_EDITING_COLUMNS})
        yield row


def _judgment_correct(values: dict) -> bool | None:
    if values["choice_id"] is not None:
        return values["choice__is_gold"]
    if values["item__expected_label"] is None:
        return None
    return matches_expected(values["item__expected_label"], label=values["label"], selections=values["selections"])


def item_flags(study: Study, limit: int | None = None) -> list[dict]:
    """Staff only: every flag annotators raised on the study's items (the first `limit` of them),
    in item order, with who raised it, why and when."""
    flags = (
        ItemFlag.objects.filter(item__study=study)
        .select_related("item__query", "annotator")
        .order_by("item__position", "created_at", "pk")
    )[:limit]
    return [
        {
            "flag": flag.pk,
            "item": flag.item_id,
            "position": flag.item.position,
            "query": flag.item.query.external_id,
            "annotator": flag.annotator.username,
            "reason": flag.reason,
            "created_at": flag.created_at,
        }
        for flag in flags
    ]


def answer_fields(judgment: Judgment) -> dict:
    """What was answered: the choice or label, with spans, rubric and rationale; not who answered,
    when, how fast, or whether it was right (a peer reviewer sees exactly this, positions in the
    item's own order, as the review page shows the item)."""
    return {
        "candidate": judgment.choice_id,
        "position": judgment.choice.position if judgment.choice else None,
        "label": judgment.label,
        "selections": judgment.selections,
        "spans": judgment.spans,
        "rubric": judgment.rubric,
        "rationale": judgment.rationale,
    }


# --- pools: how each pair entered (staff) --------------------------------------------------------------------------


def pair_sources(study: Study) -> Iterator[tuple[int, list[dict]]]:
    """(item id, every source of its pair) for the pooled items of the study, in item order:
    each run's rank as {"run", "rank"} in the order the runs were pooled, then {"pool": position}
    for a pair from the query's own pool. Streams (two cursors, merged), like the exports."""
    pairs = (
        PooledPair.objects.filter(pool__study=study, item__isnull=False)
        .order_by("item__position", "item_id")
        .values_list("pk", "item_id", "pool_position")
        .iterator(2000)
    )
    hits = (
        PoolHit.objects.filter(pair__pool__study=study, pair__item__isnull=False)
        .order_by("pair__item__position", "pair__item_id", "pk")
        .values_list("pair_id", "run_id", "rank")
        .iterator(2000)
    )
    pending = next(hits, None)
    for pair, item, pool_position in pairs:
        sources = []
        while pending is not None and pending[0] == pair:
            sources.append({"run": pending[1], "rank": pending[2]})
            pending = next(hits, None)
        if pool_position is not None:
            sources.append({"pool": pool_position})
        yield item, sources


def pool_summary(study: Study) -> dict | None:
    """The pool as staff see it: strategy and settings, the runs with what each contributed (pairs
    it retrieved within the depth, how many of them are drawn; move-to-front: the pairs drawn on
    its turns and the relevant ones among them), how much of the budget is used, and for
    move-to-front the priorities and the turn. None for a study without a pool."""
    pool = Pool.objects.filter(study=study).first()
    if pool is None:
        return None
    pairs = PooledPair.objects.filter(pool=pool)
    drawn = pairs.filter(item__isnull=False)
    per_run = defaultdict(lambda: {"retrieved": 0, "drawn": 0, "extension": 0})
    for run, extension, item in PoolHit.objects.filter(pair__pool=pool).values_list(
        "run_id", "extension", "pair__item_id"
    ):
        entry = per_run[run]
        entry["retrieved"] += 1
        entry["drawn"] += item is not None
        entry["extension"] = extension
    adaptive = pool.strategy == Pool.Strategy.MTF
    turns = Counter(drawn.exclude(drawn_from=None).values_list("drawn_from_id", flat=True))
    relevant = Counter(drawn.filter(relevant=True).values_list("drawn_from_id", flat=True))
    runs = {run.pk: run for run in Run.objects.filter(pk__in=pool.runs).select_related("retriever")}
    summary = {
        "strategy": pool.strategy,
        "depth": pool.depth,
        "budget": pool.budget,
        "budget_per_query": pool.budget_per_query,
        "queries": len(pool.queries),
        "pairs": pairs.count(),
        "drawn": drawn.count(),
        "extensions": pool.extensions,
        "runs": [
            {
                "run": run,
                "name": _run_name(runs.get(run)),
                **per_run[run],
                **({"turns": turns[run], "relevant_found": relevant[run]} if adaptive else {}),
            }
            for run in pool.runs
        ],
    }
    if pool.strategy == Pool.Strategy.RRF:
        summary["rrf_k"] = pool.rrf_k
    if pool.strategy == Pool.Strategy.RBP:
        summary["rbp_p"] = pool.rbp_p
    if adaptive:
        summary |= {"lookahead": pool.lookahead, "decided": drawn.exclude(decided=None).count(), "state": pool.state}
    return summary


def _run_name(run: Run | None) -> str | None:
    if run is None:
        return None
    return run.name or run.retriever.name


def pool_pairs(study: Study, start: int = 0, stop: int | None = None) -> list[dict]:
    """The pairs of the study's pool, judged or not, in the strategy's order (undrawn pairs of
    move-to-front last), `start`:`stop` of them: each with its runs' ranks (and the extension step
    that recorded each), its place in the query's own pool, fusion score, place in the order,
    extension step, item, the run whose turn drew it, and the outcome it was decided with."""
    pairs = list(
        PooledPair.objects.filter(pool__study=study)
        .order_by(F("order").asc(nulls_last=True), "pk")
        .values_list(
            "pk",
            "query__external_id",
            "passage__external_id",
            "item_id",
            "score",
            "order",
            "extension",
            "drawn_from_id",
            "decided",
            "relevant",
            "pool_position",
        )[start:stop]
    )
    hits = defaultdict(list)
    if pairs:
        page = PoolHit.objects.filter(pair__pool__study=study, pair__in=[pair[0] for pair in pairs])
        for pair, run, rank, extension in page.values_list("pair_id", "run_id", "rank", "extension"):
            hits[pair].append({"run": run, "rank": rank, "extension": extension})
    return [
        {
            "query": query,
            "passage": passage,
            "item": item,
            "hits": hits[pk],
            "pool_position": pool_position,
            "score": score,
            "order": order,
            "extension": extension,
            "drawn_from": drawn_from,
            "decided": decided,
            "relevant": relevant,
        }
        for pk, query, passage, item, score, order, extension, drawn_from, decided, relevant, pool_position in pairs
    ]


def own_answer_fields(judgment: Judgment) -> dict:
    """answer_fields as the annotator who gave the answer saw it: positions in the order they
    were shown (`shown_order`), the numbers they answered with (an answer without a recorded
    order, an imported one, keeps the item's)."""
    fields = answer_fields(judgment)
    order = judgment.shown_order
    if order is None:
        return fields
    if fields["position"] is not None:
        fields["position"] = shown_position(order, fields["position"])
    fields["selections"] = sorted(shown_position(order, position) for position in fields["selections"] or [])
    return fields
