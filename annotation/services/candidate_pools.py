"""Gathering a study's candidates from the database: which queries it covers, in the seeded
order it visits them, and for each query what the chosen runs ranked within the pool's depth and
what its own pool (imported with the collection) holds.

Relevance, quotability and preference studies all start from these same candidates; they differ
only in what they make of them (one item a pair, judged as a pooling strategy chooses; one
paragraph of one run; pairs or lists to compare). The gathering lives here, apart from both:
`annotation.pooling` holds the pooling strategies, plain classes on plain data that never touch
the database, and `services/pools.py` stores and draws a relevance study's `Pool`, which a
preference study does not have. Every function reads in a few ordered queries (not one a query),
so a study over thousands of queries costs the same handful of round trips.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from retrieval.errors import InputError
from retrieval.models import Collection, Hit, Passage, PoolEntry, Query, Run

from .studies import validate_run

MAX_DEPTH = 1000


def distinct_runs(runs: Sequence[Run]) -> list[Run]:
    """Each run once, in the order first given (a run named twice would count its hits twice)."""
    distinct: dict[int, Run] = {}
    for run in runs:
        distinct.setdefault(run.pk, run)
    return list(distinct.values())


def validate_depth(depth: int) -> None:
    if not 1 <= depth <= MAX_DEPTH:
        raise InputError(f"must be between 1 and {MAX_DEPTH}, got {depth}", field="depth")


def validate_pool_sources(collection: Collection, runs: Sequence[Run], depth: int, use_pools: bool) -> None:
    """Where a pool's passages may come from: at least one source (a run, or the queries' own
    pools), every run finished and ranking `collection`, and a depth within bounds."""
    if not runs and not use_pools:
        raise InputError("give at least one run, or use the queries' pools", field="runs")
    for run in runs:
        validate_run(run, collection, "runs")
    validate_depth(depth)


def queries_in_seeded_order(
    collection: Collection, external_ids: Sequence[str] | None, n_queries: int | None, seed: int
) -> list[Query]:
    """The collection's queries (or those named, each once), shuffled by `seed`: the order in
    which a study visits them until `n_queries` give items, so the same seed picks the same ones."""
    if n_queries is not None and n_queries < 1:
        raise InputError(f"must be at least 1, got {n_queries}", field="n_queries")
    queries = Query.objects.filter(collection=collection).order_by("ordinal", "pk")
    if external_ids is None:
        chosen = list(queries)
    else:
        wanted = list(dict.fromkeys(external_ids))
        found = {query.external_id: query for query in queries.filter(external_id__in=wanted)}
        missing = [external_id for external_id in wanted if external_id not in found]
        if missing:
            raise InputError(f"no query '{missing[0]}' in collection '{collection.name}'", field="queries")
        if not wanted:
            raise InputError("name at least one query", field="queries")
        # Import order before the shuffle, whatever order they were named in.
        chosen = sorted(found.values(), key=lambda query: (query.ordinal, query.pk))
    random.Random(seed).shuffle(chosen)
    return chosen


def top_hits(runs: Sequence[Run], queries: Sequence[Query], depth: int) -> dict[tuple[int, int], list[Hit]]:
    """(run id, query id) -> the run's hits for the query down to `depth`, best first, each with
    its passage."""
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


def own_pools(queries: Sequence[Query]) -> dict[int, list[tuple[int, Passage]]]:
    """Query id -> the query's own pool (imported with the collection) as (position, passage),
    in pool order."""
    found: dict[int, list[tuple[int, Passage]]] = defaultdict(list)
    entries = PoolEntry.objects.filter(query__in=queries).select_related("passage").order_by("query_id", "position")
    for entry in entries.iterator(chunk_size=2000):
        found[entry.query_id].append((entry.position, entry.passage))
    return found
