"""Runs ranked elsewhere (a TREC file, an LLM judge, a reranker): stored like the platform's own
runs, so evaluation, export, studies and comparisons treat them alike.

Decisions, the same as trec_eval's so that our metrics agree with ir-measures and pytrec_eval on
the same ranking:
- A query's passages are ordered by score, descending, and equal scores by passage external id,
  descending (trec_eval sorts ties by docno in reverse string order). Ranks are 1-based positions
  in that order; every ranked passage is stored, whatever the depth.
- A run covers every query of the collection unless the caller names the queries it covers (a
  study's, say). A covered query the ranking leaves out retrieved nothing: it scores 0 on every
  metric, as ir-measures and trec_eval -c count it, and the import reports how many there were.
- A relevant passage the run did not return is "not retrieved": it earns nothing in recall, MRR,
  nDCG, MAP or P@k, and counts for mean rank as ranked just past the query's candidate set
  (candidates + 1, the rule for a passage no ranking can reach), the pessimistic bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence

from django.db import transaction

from jobs.progress import Progress, no_progress, throttled
from retrieval.errors import InputError
from retrieval.metrics import evaluate_run
from retrieval.models import Collection, Passage, Query, Retriever, Run

from .candidates import candidate_sets
from .run_writer import RunWriter
from .runs import relevant_passages

# A query -> its ranked passages with their scores (model instances or primary keys).
Rankings = Mapping[Query | int, Sequence[tuple[Passage | int, float]]]


def imported_retriever(name: str) -> Retriever:
    """The retriever an imported run is filed under: one per system name, kind "imported"."""
    if not str(name).strip():
        raise InputError("an imported run needs the name of the system that made it", field="retriever")
    retriever, _ = Retriever.objects.get_or_create(
        name=f"imported {name}"[:200], defaults={"kind": Retriever.Kind.IMPORTED}
    )
    return retriever


def check_run_name(collection: Collection, name: str) -> str:
    """A run name must be given and new in the collection (checks refer to runs by it)."""
    name = str(name).strip()
    if not name:
        raise InputError("a run needs a name", field="name")
    if len(name) > Run._meta.get_field("name").max_length:
        raise InputError("is longer than 200 characters", field="name")
    if Run.objects.filter(collection=collection, name=name).exists():
        raise InputError(f"collection {collection.name} already has a run named {name!r}", field="name")
    return name


def trec_order(scored: Sequence[tuple[int, float]], external_ids: Mapping[int, str]) -> list[tuple[int, float]]:
    """(passage id, score) pairs in trec_eval's order: score descending, then docid descending."""
    return sorted(scored, key=lambda pair: (pair[1], external_ids[pair[0]]), reverse=True)


def candidate_counts(collection: Collection, queries: Sequence[Query]) -> dict[int, int]:
    """Query id -> the size of the candidate set the platform ranks it against."""
    counts = {}
    for candidate_set in candidate_sets(collection, queries):
        size = len(candidate_set.pool) if candidate_set.pool is not None else candidate_set.queryset.count()
        counts.update({query.pk: size for query in candidate_set.queries})
    return counts


def _primary_key(value) -> int:
    return int(getattr(value, "pk", value))


def _checked_rankings(collection: Collection, rankings: Rankings) -> tuple[dict[Query, list], dict[int, str]]:
    """The rankings with queries loaded and passages as ids, every id checked to belong to the
    collection, every score a finite number and no passage twice for a query."""
    query_ids = {_primary_key(query): ranking for query, ranking in rankings.items()}
    queries = {query.pk: query for query in collection.queries.filter(pk__in=query_ids)}
    unknown = sorted(set(query_ids) - set(queries))
    if unknown:
        raise InputError(
            f"{len(unknown)} queries are not in collection {collection.name}: {unknown[:5]}", field="query"
        )
    checked: dict[Query, list] = {}
    for query_id, ranking in query_ids.items():
        pairs = []
        for passage, score in ranking:
            try:
                score = float(score)
            except (TypeError, ValueError):
                raise InputError(
                    f"query {queries[query_id].external_id}: score {score!r} is not a number", field="score"
                ) from None
            if not math.isfinite(score):
                raise InputError(f"query {queries[query_id].external_id}: score {score!r} is not finite", field="score")
            pairs.append((_primary_key(passage), score))
        if len({passage_id for passage_id, _ in pairs}) != len(pairs):
            raise InputError(f"query {queries[query_id].external_id} ranks a passage twice", field="passage")
        checked[queries[query_id]] = pairs
    passage_ids = {passage_id for pairs in checked.values() for passage_id, _ in pairs}
    external_ids = dict(collection.passages.filter(pk__in=passage_ids).values_list("pk", "external_id"))
    unknown = sorted(passage_ids - set(external_ids))
    if unknown:
        raise InputError(
            f"{len(unknown)} passages are not in collection {collection.name}: {unknown[:5]}", field="passage"
        )
    return checked, external_ids


def _covered_queries(collection: Collection, queries: Iterable[Query | int] | None) -> dict[int, Query]:
    chosen = collection.queries.order_by("ordinal", "pk")
    if queries is not None:
        wanted = {_primary_key(query) for query in queries}
        chosen = chosen.filter(pk__in=wanted)
        if len(chosen) != len(wanted):
            raise InputError(f"some of the run's queries are not in collection {collection.name}", field="queries")
    return {query.pk: query for query in chosen}


def save_ranked_run(
    collection: Collection,
    *,
    name: str,
    retriever: Retriever | str,
    rankings: Rankings,
    parameters: dict | None = None,
    queries: Iterable[Query | int] | None = None,
    progress: Progress = no_progress,
) -> Run:
    """Store `rankings` (query -> [(passage, score)], in any order) as a finished run named `name`,
    with its hits, the exact rank of every relevant passage it returned, and its metrics.
    `retriever` is a Retriever or the name of the system (filed as an imported retriever).
    `queries` limits the run to those queries (default: all the collection's); a query among them
    without a ranking retrieved nothing. Everything is checked before anything is written, and
    written in one transaction."""
    started = time.perf_counter()
    progress = throttled(progress)
    name = check_run_name(collection, name)
    checked, external_ids = _checked_rankings(collection, rankings)
    if not checked:
        raise InputError("the ranking has no queries", field="rankings")
    covered = _covered_queries(collection, queries)
    outside = [query.external_id for query in checked if query.pk not in covered]
    if outside:
        raise InputError(f"{len(outside)} ranked queries are outside the run's queries: {outside[:5]}", field="query")
    for query in covered.values():
        checked.setdefault(query, [])
    if not isinstance(retriever, Retriever):
        retriever = imported_retriever(retriever)
    relevant = relevant_passages(collection)
    candidates = candidate_counts(collection, list(checked))
    depth = max(len(pairs) for pairs in checked.values())
    with transaction.atomic():
        run = Run.objects.create(
            collection=collection,
            retriever=retriever,
            name=name,
            parameters={**(parameters or {}), "depth": depth},
            status=Run.Status.RUNNING,
        )
        writer = RunWriter(run.pk)
        for number, (query, pairs) in enumerate(checked.items()):
            ordered = trec_order(pairs, external_ids)
            rank_of = {passage_id: rank for rank, (passage_id, _) in enumerate(ordered, start=1)}
            relevant_ranks = {
                str(passage_id): rank_of[passage_id]
                for passage_id in relevant.get(query.pk, [])
                if passage_id in rank_of
            }
            writer.add_hits(
                [query.pk] * len(ordered),
                [passage_id for passage_id, _ in ordered],
                range(1, len(ordered) + 1),
                [score for _, score in ordered],
            )
            writer.add_query(query.pk, max(candidates[query.pk], len(ordered)), relevant_ranks)
            progress(number / len(checked), f"query {number + 1}/{len(checked)}")
        writer.flush()
        run.status = Run.Status.DONE
        run.metrics = evaluate_run(run, page_coverage=True)
        run.seconds = time.perf_counter() - started
        run.save(update_fields=["status", "metrics", "seconds"])
    progress(1.0, f"{len(checked)} queries stored")
    return run


def not_retrieved(run: Run) -> int:
    """How many relevant passages of the run's queries the run did not return."""
    relevant = relevant_passages(run.collection)
    return sum(
        len(relevant.get(query_id, [])) - len(ranks)
        for query_id, ranks in run.query_results.values_list("query_id", "relevant_ranks")
    )


def imported_run_summary(run: Run) -> dict:
    """What import_run reports: the run, how many queries it ranked and its hits, how many
    relevant passages it did not return, and how many of its queries it left without a ranking
    (they count as retrieving nothing)."""
    covered = run.query_results.count()
    ranked = run.hits.values("query_id").distinct().count()
    return {
        "run_id": run.pk,
        "name": run.name,
        "queries": ranked,
        "hits": run.hits.count(),
        "not_retrieved": not_retrieved(run),
        "queries_without_ranking": covered - ranked,
    }
