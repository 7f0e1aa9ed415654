"""Creating studies of the label kinds: relevance and quotability.

Relevance (PlotRetrieval's annotation, LitSearch, BIRCO): one item per (query, passage) pair. The
candidate pairs are the union of the chosen runs' top-`depth` hits and, with `use_pools`, every
passage of the query's own pool; a passage that several sources found is ONE pair (deduplicated
by passage). Which of them are judged is the pool's strategy (`pool`: depth, rrf, rbp, mtf) under
its budget (services/pools.py, annotation/pooling.py); the study's `Pool` keeps every candidate
pair with every source that found it. The item's candidate keeps the best source for staff
(lowest rank; on a tie the run listed first) in `source_run`/`source_rank`.

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

from django.contrib.auth.models import AbstractBaseUser

from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.models import Collection, Hit, Passage, PoolEntry, Qrel, Query, Run

from ..models import Item, ItemCandidate, Study
from .labels import study_schema, validate_schema
from .pools import MAX_ITEMS, MAX_POOL_PAIRS, PoolSettings, create_pooled_study
from .studies import (
    MIN_CANDIDATES,
    PlannedItem,
    SkippedQuery,
    StudyCreation,
    no_item_error,
    store_study,
    validate_common_settings,
    validate_run,
)

MAX_DEPTH = 1000
# The pilot shows every paragraph of a source at once; more than this is no longer one screen.
MAX_MULTI_SELECT_CANDIDATES = 50
QUOTABILITY_SELECTIONS = ("top_non_gold", "top_k")
MULTI_SELECT_SOURCES = ("document", "pool")


def create_relevance_study(
    *,
    name: str,
    collection: Collection,
    runs: Sequence[Run] = (),
    depth: int = 10,
    use_pools: bool = False,
    queries: Sequence[str] | None = None,
    n_queries: int | None = None,
    pool: str = "depth",
    budget: int | None = None,
    budget_per_query: int | None = None,
    rrf_k: int = 60,
    rbp_p: float = 0.8,
    lookahead: int = 1,
    label_schema: dict | None = None,
    judgments_per_item: int = 3,
    seed: int = 0,
    context_left: int = 4,
    context_right: int = 4,
    guidelines: str = "",
    annotators: Iterable[AbstractBaseUser] = (),
    claim_minutes: int = 30,
    more_context: bool = True,
    created_by: AbstractBaseUser | None = None,
    progress: Progress = no_progress,
) -> StudyCreation:
    """A relevance study over the pooled (query, passage) pairs of `runs` (top `depth`) and, with
    `use_pools`, the queries' own pools, judged as the `pool` strategy chooses under the budget
    (judged pairs in all, `budget`, and per query, `budget_per_query`; `rrf_k` and `rbp_p` are
    the fusions' parameters, `lookahead` move-to-front's open items). `queries` limits it to
    those external ids; `n_queries` takes that many of them (seeded) that have at least one pair.
    One transaction; InputError names the offending field."""
    settings = PoolSettings(pool, budget, budget_per_query, rrf_k, rbp_p, lookahead)
    settings.validate(use_pools=use_pools)
    runs = _distinct_runs(runs)
    schema = validate_schema(label_schema, kind=Study.Kind.RELEVANCE)
    if schema["multi_select"]:
        raise InputError(
            "a relevance item shows one passage; multi-select is for quotability", field="label_schema.multi_select"
        )
    fields = _study_fields(
        name=name,
        collection=collection,
        label_schema=schema,
        judgments_per_item=judgments_per_item,
        seed=seed,
        context_left=context_left,
        context_right=context_right,
        guidelines=guidelines,
        claim_minutes=claim_minutes,
        more_context=more_context,
        created_by=created_by,
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
        found: dict[int, PlannedItem] = {}
        for run in runs:
            for hit in ranked.get((run.pk, query.pk), []):
                entry = found.setdefault(hit.passage_id, _one_passage_item(query, hit.passage, run, hit.rank))
                entry.sources.append({"run": run.pk, "rank": hit.rank})
                best = entry.candidates[0]
                if hit.rank < best.source_rank:
                    best.source_run, best.source_rank = run, hit.rank
        for position, passage in pools.get(query.pk, []):
            entry = found.setdefault(passage.pk, _one_passage_item(query, passage))
            entry.sources.append({"pool": position})
        if not found:
            return [], "no passage in the runs' top hits" + (" nor in its pool" if use_pools else "")
        return list(found.values()), ""

    # Without a budget every candidate pair may become an item.
    limit = MAX_ITEMS if settings.budget is None else MAX_POOL_PAIRS
    planned, skipped = _plan_queries(candidates, plan, n_queries, progress, limit=limit)
    parameters = {
        "runs": [run.pk for run in runs],
        "depth": depth,
        "use_pools": use_pools,
        "queries": list(queries) if queries is not None else None,
        "n_queries": n_queries,
        **settings.parameters(),
    }
    return create_pooled_study(
        planned,
        skipped,
        settings=settings,
        runs=runs,
        depth=depth,
        annotators=annotators,
        parameters=parameters,
        fields=fields,
        progress=progress,
    )


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
    more_context: bool = True,
    created_by: AbstractBaseUser | None = None,
    progress: Progress = no_progress,
) -> StudyCreation:
    """A quotability study (see the module docstring): one paragraph per item drawn from `run`
    by `selection`, or, when the schema is multi-select, one item per context showing every
    paragraph of its source (`candidates_from` "document" or "pool"). Default 5 judgments per
    item and the paper's yes/no question; one transaction; InputError names the field."""
    schema = validate_schema(label_schema, kind=Study.Kind.QUOTABILITY)
    fields = _study_fields(
        name=name,
        collection=collection,
        label_schema=schema,
        judgments_per_item=judgments_per_item,
        seed=seed,
        context_left=context_left,
        context_right=context_right,
        guidelines=guidelines,
        claim_minutes=claim_minutes,
        more_context=more_context,
        created_by=created_by,
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
    return _create(Study.Kind.QUOTABILITY, fields, annotators, planned, skipped, parameters, progress)


def qrel_label(item: Item):
    """What the qrels say about an item, in the form `labels.is_correct` compares (so staff can
    make it a gold or qualification item), or None when they say nothing usable.

    One passage: the pair's qrel relevance when it is one of the schema's values; for a binary
    scale any positive relevance is 1 and any other 0. No qrel for the pair: None (unjudged is
    not "not relevant"). Multi-select: the positions of the candidates with positive relevance,
    when the query has qrels at all."""
    if item.study.kind in (Study.Kind.PROXY, Study.Kind.PREFERENCE):
        return None
    schema = study_schema(item.study)
    relevance = dict(Qrel.objects.filter(query=item.query).values_list("passage_id", "relevance"))
    if schema["multi_select"]:
        if not relevance:
            return None
        return sorted(
            position
            for passage_id, position in item.candidates.values_list("passage_id", "position")
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


def _study_fields(
    *,
    name,
    collection,
    label_schema,
    judgments_per_item,
    seed,
    context_left,
    context_right,
    guidelines,
    claim_minutes,
    more_context,
    created_by,
) -> dict:
    """The Study fields every label study sets, validated."""
    validate_common_settings(
        name=name,
        judgments_per_item=judgments_per_item,
        context_left=context_left,
        context_right=context_right,
        claim_minutes=claim_minutes,
    )
    return {
        "name": name,
        "collection": collection,
        "label_schema": label_schema,
        "judgments_per_item": judgments_per_item,
        "seed": seed,
        "context_left": context_left,
        "context_right": context_right,
        "guidelines": guidelines,
        "claim_minutes": claim_minutes,
        "more_context": more_context,
        "created_by": created_by,
    }


def _one_passage_item(
    query: Query, passage: Passage, run: Run | None = None, rank: int | None = None, sources: list[dict] | None = None
) -> PlannedItem:
    """An item showing one passage, with the run and rank that found it (staff provenance)."""
    return PlannedItem(query, [ItemCandidate(passage=passage, source_run=run, source_rank=rank)], sources or [])


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


def _plan_queries(queries: list[Query], plan, n_queries: int | None, progress: Progress, limit: int = MAX_ITEMS):
    """Visit the queries in their (seeded) order until `n_queries` of them give items; a query
    that gives none is skipped and reported. More than `limit` planned items is refused."""
    planned: list[PlannedItem] = []
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
        if len(planned) > limit:
            what = "items" if limit == MAX_ITEMS else "pairs in the pool"
            raise InputError(f"more than {limit} {what}; choose fewer queries or a smaller depth", field="depth")
    if not planned:
        raise no_item_error("no query", skipped, field="queries")
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
            _one_passage_item(query, hit.passage, run, hit.rank, sources=[{"run": run.pk, "rank": hit.rank}])
            for hit in hits
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
        return [PlannedItem(query, [ItemCandidate(passage=passage) for passage in passages])], ""

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


def _create(
    kind: str,
    fields: dict,
    annotators: Iterable[AbstractBaseUser],
    planned: list[PlannedItem],
    skipped: list[SkippedQuery],
    parameters: dict,
    progress: Progress,
) -> StudyCreation:
    """The study and its items, shown in a seeded random order, in one transaction."""
    random.Random(f"{fields['seed']}:items").shuffle(planned)
    return store_study(
        planned,
        skipped,
        annotators=annotators,
        parameters=parameters,
        progress=progress,
        kind=kind,
        candidates_per_item=max(len(entry.candidates) for entry in planned),
        **fields,
    )
