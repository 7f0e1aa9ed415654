"""Creating studies of the label kinds: relevance and quotability.

Relevance (PlotRetrieval's annotation, LitSearch, BIRCO): one item per (query, passage) pair. The
pairs are the union of the chosen runs' top-`depth` hits and, with `use_pools`, every passage of
the query's own pool; a passage that several sources found is ONE item (deduplicated by passage).
The item's candidate keeps the best source for staff (lowest rank; on a tie the run listed
first) in `source_run`/`source_rank`; every source of every item is kept in
`Study.parameters["sources"]` (item id -> [{"run": id, "rank": r} | {"pool": position}]).

Quotability (the quote-recommendation paper): the context (article title in the query's
metadata, left context) with one source paragraph, asking whether it holds an excerpt worth
quoting next. `selection="top_non_gold"` reproduces the paper's crowd evaluation: a context
becomes an item only when the run's top paragraph is NOT its gold, and the item shows that top
paragraph; `selection="top_k"` takes the run's top-`depth` paragraphs whatever they are. A
multi-select schema gives the pilot variant instead: one item per context whose candidates are
all the paragraphs of the source (the gold's document, passages of the gold's length, in reading
order) or the query's own pool (shuffled: pool order can give the answer away).

Everything random comes from the seed: which queries (visited in a seeded order until
`n_queries` give items), and the order in which the items are shown. Items never carry their
qrel: `qrel_label(item)` reads it for staff, e.g. to make an item a gold or qualification item.
"""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from retrieval.errors import InputError
from retrieval.jobs import Progress, no_progress
from retrieval.models import Collection, Hit, Passage, PoolEntry, Qrel, Query, Run

from ..models import Item, ItemCandidate, Study
from .labels import study_schema, validate_schema
from .studies import MIN_CANDIDATES, SkippedQuery, StudyCreation, validate_common_settings, validate_run

MAX_DEPTH = 1000
MAX_ITEMS = 20_000
# The pilot shows every paragraph of a source at once; more than this is no longer one screen.
MAX_MULTI_SELECT_CANDIDATES = 50
QUOTABILITY_SELECTIONS = ("top_non_gold", "top_k")
MULTI_SELECT_SOURCES = ("document", "pool")


@dataclass
class _PlannedItem:
    query: Query
    passages: list[Passage]  # in display order
    sources: list[dict] = field(default_factory=list)  # staff provenance of a one-passage item
    best_run: Run | None = None
    best_rank: int | None = None


@dataclass(frozen=True)
class _CommonSettings:
    """What every label study stores besides its items."""

    name: str
    collection: Collection
    label_schema: dict
    judgments_per_item: int
    seed: int
    context_left: int
    context_right: int
    guidelines: str
    annotators: list
    claim_minutes: int
    created_by: AbstractBaseUser | None


def create_relevance_study(
    *,
    name: str,
    collection: Collection,
    runs: Sequence[Run] = (),
    depth: int = 10,
    use_pools: bool = False,
    queries: Sequence[str] | None = None,
    n_queries: int | None = None,
    label_schema: dict | None = None,
    judgments_per_item: int = 3,
    seed: int = 0,
    context_left: int = 4,
    context_right: int = 4,
    guidelines: str = "",
    annotators: Iterable[AbstractBaseUser] = (),
    claim_minutes: int = 30,
    created_by: AbstractBaseUser | None = None,
    progress: Progress = no_progress,
) -> StudyCreation:
    """A relevance study over the pooled (query, passage) pairs of `runs` (top `depth`) and, with
    `use_pools`, the queries' own pools. `queries` limits it to those external ids; `n_queries`
    takes that many of them (seeded) that have at least one pair. One transaction; InputError
    names the offending field."""
    runs = _distinct_runs(runs)
    schema = validate_schema(label_schema, kind=Study.Kind.RELEVANCE)
    if schema["multi_select"]:
        raise InputError(
            "a relevance item shows one passage; multi-select is for quotability", field="label_schema.multi_select"
        )
    settings = _common_settings(
        name=name, collection=collection, label_schema=schema, judgments_per_item=judgments_per_item, seed=seed,
        context_left=context_left, context_right=context_right, guidelines=guidelines, annotators=annotators,
        claim_minutes=claim_minutes, created_by=created_by,
    )
    if not runs and not use_pools:
        raise InputError("give at least one run, or use the queries' pools", field="runs")
    for run in runs:
        validate_run(run, collection, "runs")
    _check_depth(depth)
    candidates = _selected_queries(collection, queries, n_queries)
    random.Random(seed).shuffle(candidates)
    ranked = _top_hits(runs, candidates, depth)
    pools = _pools(candidates) if use_pools else {}

    def plan(query: Query):
        found: dict[int, _PlannedItem] = {}
        for run in runs:
            for hit in ranked.get((run.pk, query.pk), []):
                entry = found.setdefault(
                    hit.passage_id, _PlannedItem(query, [hit.passage], best_run=run, best_rank=hit.rank)
                )
                entry.sources.append({"run": run.pk, "rank": hit.rank})
                if hit.rank < entry.best_rank:
                    entry.best_run, entry.best_rank = run, hit.rank
        for position, passage in pools.get(query.pk, []):
            entry = found.setdefault(passage.pk, _PlannedItem(query, [passage]))
            entry.sources.append({"pool": position})
        if not found:
            return [], "no passage in the runs' top hits" + (" nor in its pool" if use_pools else "")
        return list(found.values()), ""

    planned, skipped = _plan_queries(candidates, plan, n_queries, progress)
    parameters = {
        "runs": [run.pk for run in runs],
        "depth": depth,
        "use_pools": use_pools,
        "queries": list(queries) if queries is not None else None,
        "n_queries": n_queries,
    }
    return _create(Study.Kind.RELEVANCE, settings, planned, skipped, parameters, progress)


def create_quotability_study(
    *,
    name: str,
    collection: Collection,
    run: Run | None = None,
    selection: str = "top_non_gold",
    depth: int = 1,
    candidates_from: str = "document",
    queries: Sequence[str] | None = None,
    n_queries: int | None = None,
    label_schema: dict | None = None,
    judgments_per_item: int = 5,
    seed: int = 0,
    context_left: int = 4,
    context_right: int = 0,
    guidelines: str = "",
    annotators: Iterable[AbstractBaseUser] = (),
    claim_minutes: int = 30,
    created_by: AbstractBaseUser | None = None,
    progress: Progress = no_progress,
) -> StudyCreation:
    """A quotability study (see the module docstring): one paragraph per item drawn from `run`
    by `selection`, or, when the schema is multi-select, one item per context showing every
    paragraph of its source (`candidates_from` "document" or "pool"). Default 5 judgments per
    item and the paper's yes/no question; one transaction; InputError names the field."""
    schema = validate_schema(label_schema, kind=Study.Kind.QUOTABILITY)
    settings = _common_settings(
        name=name, collection=collection, label_schema=schema, judgments_per_item=judgments_per_item, seed=seed,
        context_left=context_left, context_right=context_right, guidelines=guidelines, annotators=annotators,
        claim_minutes=claim_minutes, created_by=created_by,
    )
    candidates = _selected_queries(collection, queries, n_queries)
    random.Random(seed).shuffle(candidates)
    if schema["multi_select"]:
        if run is not None:
            raise InputError("the pilot shows every paragraph of a source, not a run's hits", field="run")
        if candidates_from not in MULTI_SELECT_SOURCES:
            raise InputError(
                f"must be one of {', '.join(MULTI_SELECT_SOURCES)}, got {candidates_from!r}", field="candidates_from"
            )
        plan = _source_paragraphs_planner(candidates_from, candidates, seed)
        parameters = {"candidates_from": candidates_from}
    else:
        if run is None:
            raise InputError("give the run whose paragraphs are judged", field="run")
        validate_run(run, collection, "run")
        if selection not in QUOTABILITY_SELECTIONS:
            raise InputError(
                f"must be one of {', '.join(QUOTABILITY_SELECTIONS)}, got {selection!r}", field="selection"
            )
        if selection == "top_k":
            _check_depth(depth)
        plan = _run_paragraphs_planner(run, selection, 1 if selection == "top_non_gold" else depth, candidates)
        parameters = {"runs": [run.pk], "selection": selection, "depth": depth if selection == "top_k" else 1}
    planned, skipped = _plan_queries(candidates, plan, n_queries, progress)
    parameters |= {"queries": list(queries) if queries is not None else None, "n_queries": n_queries}
    return _create(Study.Kind.QUOTABILITY, settings, planned, skipped, parameters, progress)


def qrel_label(item: Item):
    """What the qrels say about an item, in the form `labels.is_correct` compares (so staff can
    make it a gold or qualification item), or None when they say nothing usable.

    One passage: the pair's qrel relevance when it is one of the schema's values; for a binary
    scale any positive relevance is 1 and any other 0. No qrel for the pair: None (unjudged is
    not "not relevant"). Multi-select: the positions of the candidates with positive relevance,
    when the query has qrels at all."""
    schema = study_schema(item.study)
    if item.study.kind == Study.Kind.PROXY:
        return None
    relevance = dict(Qrel.objects.filter(query=item.query).values_list("passage_id", "relevance"))
    if schema["multi_select"]:
        if not relevance:
            return None
        return sorted(
            position for passage_id, position in item.candidates.values_list("passage_id", "position")
            if relevance.get(passage_id, 0) > 0
        )
    passage_id = item.candidates.values_list("passage_id", flat=True).first()
    if passage_id not in relevance:
        return None
    value = relevance[passage_id]
    if schema["values"] == [0, 1]:
        return int(value > 0)
    return value if value in schema["values"] else None


# --- planning ------------------------------------------------------------------------------------


def _common_settings(*, name, collection, label_schema, judgments_per_item, seed, context_left, context_right,
                     guidelines, annotators, claim_minutes, created_by) -> _CommonSettings:
    validate_common_settings(
        name=name, judgments_per_item=judgments_per_item, context_left=context_left, context_right=context_right,
        claim_minutes=claim_minutes,
    )
    return _CommonSettings(
        name=name, collection=collection, label_schema=label_schema, judgments_per_item=judgments_per_item, seed=seed,
        context_left=context_left, context_right=context_right, guidelines=guidelines, annotators=list(annotators),
        claim_minutes=claim_minutes, created_by=created_by,
    )


def _distinct_runs(runs: Sequence[Run]) -> list[Run]:
    distinct: dict[int, Run] = {}
    for run in runs:
        distinct.setdefault(run.pk, run)
    return list(distinct.values())


def _check_depth(depth: int) -> None:
    if not 1 <= depth <= MAX_DEPTH:
        raise InputError(f"must be between 1 and {MAX_DEPTH}, got {depth}", field="depth")


def _selected_queries(collection: Collection, external_ids: Sequence[str] | None, n_queries: int | None) -> list[Query]:
    """The collection's queries (or those named), in import order; shuffled by the caller."""
    if n_queries is not None and n_queries < 1:
        raise InputError(f"must be at least 1, got {n_queries}", field="n_queries")
    queries = Query.objects.filter(collection=collection).order_by("ordinal", "pk")
    if external_ids is None:
        return list(queries)
    wanted = list(dict.fromkeys(external_ids))
    found = {query.external_id: query for query in queries.filter(external_id__in=wanted)}
    missing = [external_id for external_id in wanted if external_id not in found]
    if missing:
        raise InputError(f"no query '{missing[0]}' in collection '{collection.name}'", field="queries")
    if not wanted:
        raise InputError("name at least one query", field="queries")
    return sorted(found.values(), key=lambda query: (query.ordinal, query.pk))


def _plan_queries(queries: list[Query], plan, n_queries: int | None, progress: Progress):
    """Visit the queries in their (seeded) order until `n_queries` of them give items; a query
    that gives none is skipped and reported."""
    planned: list[_PlannedItem] = []
    skipped: list[SkippedQuery] = []
    used = 0
    target = n_queries or len(queries)
    for query in queries:
        if used == target:
            break
        items, reason = plan(query)
        if items:
            planned.extend(items)
            used += 1
        else:
            skipped.append(SkippedQuery(query.external_id, reason))
        progress(used / max(target, 1), f"{used} of {target} queries planned")
        if len(planned) > MAX_ITEMS:
            raise InputError(f"more than {MAX_ITEMS} items; choose fewer queries or a smaller depth", field="depth")
    if not planned:
        detail = f"; e.g. query {skipped[0].query}: {skipped[0].reason}" if skipped else ""
        raise InputError(f"no query can be made into an item{detail}", field="queries")
    return planned, skipped


def _top_hits(runs: Sequence[Run], queries: Sequence[Query], depth: int) -> dict[tuple[int, int], list[Hit]]:
    """(run id, query id) -> the run's hits for the query down to `depth`, best first."""
    found: dict[tuple[int, int], list[Hit]] = defaultdict(list)
    if not runs:
        return found
    hits = (
        Hit.objects.filter(run__in=runs, query__in=queries, rank__lte=depth)
        .select_related("passage")
        .order_by("run_id", "query_id", "rank")
    )
    for hit in hits.iterator(chunk_size=2000):
        found[hit.run_id, hit.query_id].append(hit)
    return found


def _pools(queries: Sequence[Query]) -> dict[int, list[tuple[int, Passage]]]:
    """Query id -> its pool as (position, passage), in pool order."""
    found: dict[int, list[tuple[int, Passage]]] = defaultdict(list)
    entries = PoolEntry.objects.filter(query__in=queries).select_related("passage").order_by("query_id", "position")
    for entry in entries.iterator(chunk_size=2000):
        found[entry.query_id].append((entry.position, entry.passage))
    return found


def _gold_passages(queries: Sequence[Query]) -> dict[int, list[Passage]]:
    """Query id -> its relevant passages, most relevant first (then import order)."""
    found: dict[int, list[Passage]] = defaultdict(list)
    qrels = (
        Qrel.objects.filter(query__in=queries, relevance__gt=0)
        .select_related("passage")
        .order_by("query_id", "-relevance", "passage__ordinal")
    )
    for qrel in qrels:
        found[qrel.query_id].append(qrel.passage)
    return found


def _run_paragraphs_planner(run: Run, selection: str, depth: int, queries: Sequence[Query]):
    ranked = _top_hits([run], queries, depth)
    golds = _gold_passages(queries) if selection == "top_non_gold" else {}

    def plan(query: Query):
        hits = ranked.get((run.pk, query.pk), [])
        if not hits:
            return [], f"run {run.pk} has no hit for it"
        if selection == "top_non_gold":
            gold_ids = {passage.pk for passage in golds.get(query.pk, [])}
            if not gold_ids:
                return [], "no gold paragraph in the qrels, so its top paragraph cannot be called non-gold"
            if hits[0].passage_id in gold_ids:
                return [], f"run {run.pk}'s top paragraph is the gold"
        return [
            _PlannedItem(query, [hit.passage], [{"run": run.pk, "rank": hit.rank}], run, hit.rank) for hit in hits
        ], ""

    return plan


def _source_paragraphs_planner(candidates_from: str, queries: Sequence[Query], seed: int):
    pools = _pools(queries) if candidates_from == "pool" else {}
    golds = _gold_passages(queries) if candidates_from == "document" else {}

    def plan(query: Query):
        if candidates_from == "pool":
            passages = [passage for _, passage in pools.get(query.pk, [])]
            random.Random(f"{seed}:{query.external_id}").shuffle(passages)
        else:
            passages = _document_paragraphs(query, golds.get(query.pk, []))
            if passages is None:
                return [], "no source document (neither a gold passage's document nor the query's)"
        if not MIN_CANDIDATES <= len(passages) <= MAX_MULTI_SELECT_CANDIDATES:
            return [], (
                f"its source has {len(passages)} paragraphs; the pilot shows "
                f"{MIN_CANDIDATES} to {MAX_MULTI_SELECT_CANDIDATES}"
            )
        return [_PlannedItem(query, passages)], ""

    return plan


def _document_paragraphs(query: Query, golds: list[Passage]) -> list[Passage] | None:
    """The source's paragraphs in reading order: the passages of the gold's document (else the
    query's) that have the gold's length, so overlapping windows of other lengths stay out."""
    gold = golds[0] if golds else None
    document_id = gold.document_id if gold is not None and gold.document_id else query.document_id
    if document_id is None:
        return None
    passages = Passage.objects.filter(document_id=document_id)
    if gold is not None and gold.document_id == document_id:
        passages = passages.filter(length=gold.length)
    return list(passages.order_by("ordinal", "pk"))


# --- storing -------------------------------------------------------------------------------------


def _create(kind: str, settings: _CommonSettings, planned: list[_PlannedItem], skipped: list[SkippedQuery],
            parameters: dict, progress: Progress) -> StudyCreation:
    """The study and its items, shown in a seeded random order, in one transaction."""
    random.Random(f"{settings.seed}:items").shuffle(planned)
    with transaction.atomic():
        study = Study.objects.create(
            name=settings.name, kind=kind, collection=settings.collection, seed=settings.seed,
            candidates_per_item=max(len(entry.passages) for entry in planned),
            judgments_per_item=settings.judgments_per_item, context_left=settings.context_left,
            context_right=settings.context_right, guidelines=settings.guidelines, label_schema=settings.label_schema,
            claim_minutes=settings.claim_minutes, created_by=settings.created_by,
            parameters={**parameters, "skipped": [{"query": s.query, "reason": s.reason} for s in skipped]},
        )
        study.annotators.set(settings.annotators)
        items = Item.objects.bulk_create(
            [Item(study=study, query=entry.query, position=position) for position, entry in enumerate(planned)]
        )
        ItemCandidate.objects.bulk_create(
            [
                ItemCandidate(
                    item=item, passage=passage, position=position, source_run=entry.best_run,
                    source_rank=entry.best_rank,
                )
                for item, entry in zip(items, planned)
                for position, passage in enumerate(entry.passages)
            ]
        )
        if any(entry.sources for entry in planned):
            study.parameters["sources"] = {str(item.pk): entry.sources for item, entry in zip(items, planned)}
            study.save(update_fields=["parameters"])
    progress(1.0, f"{len(planned)} items")
    return StudyCreation(study=study, items=len(planned), skipped=skipped)
