"""Creating preference studies: which candidates each query compares, and how.

A query's pool is the union of the chosen runs' top-`depth` passages (deduplicated, in order of
their best rank, then the runs' order) and, with `use_pools`, its own pool, as relevance studies
pool them. The pool is shuffled once per query (seeded): pool order can give the answer away.
Each item compares two candidates (pairwise) or `list_size` of them (listwise); the candidates'
display order is shuffled once per item (seeded by the study seed, the query and the passages),
and every judgment records the order it was given in (preference_schema.py).

Designs (`design`): "all-pairs" asks every pair of each pool; "random" asks `budget` pairs (or,
for lists, `budget` lists) per query drawn at random; "adaptive" (pairs only) starts each query
with its first round and adds items as judgments land, by the rule "top-k" (Clarke, Vtyurina and
Smucker's procedure) or "informative" (the pairs a Bradley-Terry fit is least sure of), never
more than `budget` pairs per query (preference_designs.py says exactly how).

Everything random comes from the seed; one transaction; InputError names the offending field.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.models import Collection, Query, Run

from ..models import PreferenceQuery, Study
from ..preference_schema import validate_preference_schema
from .label_studies import _check_depth, _distinct_runs, _pools, _selected_queries, _study_fields, _top_hits
from .preference_designs import DEFAULT_ALPHA, TopK, all_pairs, random_lists, random_pairs
from .preference_scheduling import (
    ADAPTIVE,
    INFORMATIVE,
    TOP_K,
    advance_queries,
    best_sources,
    open_round,
    passage_labels,
    planned_item,
)
from .studies import SkippedQuery, StudyCreation, no_item_error, store_study, validate_run

DESIGNS = ("all-pairs", "random", ADAPTIVE)
RULES = (TOP_K, INFORMATIVE)
# Items a fixed design may create in one study (all pairs of 50-passage pools: 1,225 a query).
MAX_ITEMS = 100_000
DEFAULT_BATCH = 2


def create_preference_study(
    *,
    name: str,
    collection: Collection,
    runs: Sequence[Run] = (),
    depth: int = 10,
    use_pools: bool = False,
    queries: Sequence[str] | None = None,
    n_queries: int | None = None,
    design: str = "all-pairs",
    budget: int | None = None,
    rule: str = TOP_K,
    top_k: int = 5,
    pairings: int | None = None,
    all_pairs_below: int | None = None,
    batch: int = DEFAULT_BATCH,
    alpha: float = DEFAULT_ALPHA,
    label_schema: dict | None = None,
    judgments_per_item: int | None = None,
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
    """A preference study over the runs' pooled passages (see the module docstring). Judgments per
    item default to 1 for adaptive designs (each pair asked once, as Clarke et al. do) and 3
    otherwise."""
    runs = _distinct_runs(runs)
    schema = validate_preference_schema(label_schema)
    plan = _design(schema, design, budget, rule, top_k, pairings, all_pairs_below, batch, alpha)
    if judgments_per_item is None:
        judgments_per_item = 1 if design == ADAPTIVE else 3
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
    pools, skipped = _query_pools(candidates, runs, depth, use_pools, n_queries, schema["list_size"], seed)
    parameters = {
        "runs": [run.pk for run in runs],
        "depth": depth,
        "use_pools": use_pools,
        "queries": list(queries) if queries is not None else None,
        "n_queries": n_queries,
        "design": plan,
    }
    study_fields = {**fields, "kind": Study.Kind.PREFERENCE, "candidates_per_item": schema["list_size"]}
    with transaction.atomic():
        if plan["design"] == ADAPTIVE:
            creation = store_study(
                [], skipped, annotators=annotators, parameters=parameters, progress=no_progress, **study_fields
            )
            items = _open_adaptive(creation.study, pools)
            creation = StudyCreation(study=creation.study, items=items, skipped=skipped)
        else:
            planned = _fixed_items(pools, schema, plan, runs, seed)
            creation = store_study(
                planned, skipped, annotators=annotators, parameters=parameters, progress=no_progress, **study_fields
            )
    progress(1.0, f"{creation.items} items")
    return creation


def _design(schema, design, budget, rule, top_k, pairings, all_pairs_below, batch, alpha) -> dict:
    """The design's settings, validated, as stored in `parameters["design"]`."""
    if design not in DESIGNS:
        raise InputError(f"must be one of {', '.join(DESIGNS)}, got {design!r}", field="design")
    if budget is not None and budget < 1:
        raise InputError(f"must be at least 1, got {budget}", field="budget")
    listwise = schema["shape"] == "listwise"
    if listwise and design != "random":
        raise InputError("lists are drawn at random: use the random design with a budget of lists", field="design")
    if design == "random" and budget is None:
        raise InputError(
            f"the random design asks `budget` {'lists' if listwise else 'pairs'} per query", field="budget"
        )
    if design == "all-pairs" and budget is not None:
        raise InputError("all pairs are asked; a budget is for the random and adaptive designs", field="budget")
    plan = {"design": design, "budget": budget}
    if design != ADAPTIVE:
        return plan
    if rule not in RULES:
        raise InputError(f"must be one of {', '.join(RULES)}, got {rule!r}", field="rule")
    if rule == INFORMATIVE:
        if budget is None:
            raise InputError("the informative rule asks pairs until the budget is spent: give one", field="budget")
        if batch < 1:
            raise InputError(f"must be at least 1, got {batch}", field="batch")
        if not alpha > 0:
            raise InputError(f"must be greater than 0, got {alpha}", field="alpha")
        return {**plan, "rule": rule, "batch": batch, "alpha": alpha}
    procedure = TopK.with_defaults(top_k, pairings, all_pairs_below)
    for field, message in procedure.problems():
        raise InputError(message, field=field)
    return {
        **plan,
        "rule": rule,
        "top_k": procedure.k,
        "pairings": procedure.pairings,
        "all_pairs_below": procedure.all_pairs_below,
    }


def _query_pools(queries, runs, depth, use_pools, n_queries, size, seed):
    """(query -> its pool of passage ids, shuffled), visiting the queries in their seeded order
    until `n_queries` have a pool of at least `size` passages; the others are skipped."""
    ranked = _top_hits(runs, queries, depth)
    own_pools = _pools(queries) if use_pools else {}
    pools: dict[Query, list[int]] = {}
    skipped: list[SkippedQuery] = []
    target = n_queries or len(queries)
    for query in queries:
        if len(pools) == target:
            break
        hits = sorted(
            (
                (hit.rank, index, hit.passage_id)
                for index, run in enumerate(runs)
                for hit in ranked.get((run.pk, query.pk), [])
            ),
        )
        pool = list(dict.fromkeys([passage for *_, passage in hits] + [p.pk for _, p in own_pools.get(query.pk, [])]))
        if len(pool) < size:
            skipped.append(
                SkippedQuery(query.external_id, f"its pool holds {len(pool)} passages; an item compares {size}")
            )
            continue
        random.Random(f"{seed}:pool:{query.external_id}").shuffle(pool)
        pools[query] = pool
    if not pools:
        raise no_item_error("no query", skipped, field="queries")
    return pools, skipped


def _fixed_items(pools: dict[Query, list[int]], schema: dict, plan: dict, runs: Sequence[Run], seed: int) -> list:
    """Every item of a fixed design, in a seeded order mixing the queries."""
    planned = []
    run_ids = [run.pk for run in runs]
    for query, pool in pools.items():
        rng = random.Random(f"{seed}:design:{query.external_id}")
        if schema["shape"] == "listwise":
            groups = random_lists(pool, schema["list_size"], plan["budget"], rng)
        elif plan["design"] == "random":
            groups = random_pairs(pool, plan["budget"], rng)
        else:
            groups = all_pairs(pool)
        labels = passage_labels(pool)
        sources = best_sources(run_ids, query, pool)
        planned += [planned_item(seed, query, group, labels, sources) for group in groups]
        if len(planned) > MAX_ITEMS:
            raise InputError(
                f"more than {MAX_ITEMS} items; choose fewer queries, a smaller depth or a budget", field="depth"
            )
    random.Random(f"{seed}:items").shuffle(planned)
    return planned


def _open_adaptive(study: Study, pools: dict[Query, list[int]]) -> int:
    """One PreferenceQuery per query and its first pairs: the top-k procedure's first round, or
    the informative rule's first batch."""
    states = PreferenceQuery.objects.bulk_create(
        [PreferenceQuery(study=study, query=query, pool=pool, contenders=pool) for query, pool in pools.items()]
    )
    design = study.parameters["design"]
    added = 0
    for state in states:
        if design["rule"] == TOP_K:
            added += open_round(study, state, list(state.pool), design, set())
            state.save()
    if design["rule"] == INFORMATIVE:
        added += advance_queries(study, [state.query_id for state in states])
    return added
