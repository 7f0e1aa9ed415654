"""Leaderboards: several runs of one collection ranked by any measures under one qrels source
(the collection's own, a study's aggregated labels, a judge's), as a paper's results table
reports them: each run's mean with its standard error, Judged@k beside every measure, the paired
tests of compare_runs between every pair, and optionally the collection's reusability by
leave-one-run-out.

Decisions:
- Values are those of ir-measures on the same qrels and the runs' exported TREC files: the
  stored hits only (never the exact ranks past them, which other qrels have no counterpart
  for); unjudged passages are not relevant; every judged query counts for every run, a query a
  run left out or judged only non-relevant scoring 0 (retrieval.metrics). Mean rank, which
  reads ranks past the stored hits, is refused here.
- `ranking` orders the runs by mean, best first; equal means keep the order the runs were
  named in.
- Leave-one-run-out (Zobel 1998): the pool is the union of every run's top DEPTH hits per
  query; for each run, the judged pairs that only that run contributed to it are removed from
  the qrels and the run alone is evaluated again (its query set unchanged: a query whose pairs
  all went keeps its place and scores 0). `rank_change` is the run's place among the other
  runs' full values with its leave-one-out value, minus its full place (positive: it falls).
  `kendall_tau` compares, per measure, the runs' full values with their leave-one-out values
  (scipy's kendalltau, τ-b); null where one side is constant.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from scipy import stats

from evaluation.aggregates import LEADERBOARD_METRICS
from evaluation.agreement import finite_or_none
from evaluation.comparison import DEFAULT_PERMUTATIONS, collection_runs, column_summary, paired_tests, run_label
from retrieval.errors import InputError
from retrieval.measures import Measure, judged_share, parse_measures
from retrieval.metrics import (
    coverage_threshold,
    coverage_warning,
    judged_cutoffs,
    judged_key,
    run_outcomes,
    stored_hits,
)
from retrieval.models import Collection, Run
from retrieval.qrels_sources import Qrels, load_qrels

SIGNIFICANCE = 0.05


def leaderboard_measures(text: str | Sequence[str] | None) -> list[tuple[str, Measure]]:
    """(name as written, measure) for the measures asked for (default LEADERBOARD_METRICS)."""
    named = parse_measures(text, LEADERBOARD_METRICS)
    for name, measure in named:
        if measure.measure == "mean_rank":
            raise InputError(f"{name!r} reads ranks past the stored hits; use evaluate_run", field="metrics")
    return named


def _depth(value) -> int | None:
    if value is None or value == "":
        return None
    try:
        depth = int(value)
    except (TypeError, ValueError):
        depth = 0
    if not 1 <= depth <= 100_000:
        raise InputError(f"the pool depth must be a whole number, 1 to 100000, not {value!r}", field="leave_one_out")
    return depth


def query_scores(runs: Sequence[Run], qrels: Qrels, named: Sequence[tuple[str, Measure]], cutoffs) -> dict:
    """run id -> {"values": name -> per-query values, "judged": cutoff key -> per-query Judged@k,
    "queries": query external ids}, queries in collection order."""
    measures = [measure for _, measure in named]
    scores = {}
    for run in runs:
        outcomes = run_outcomes(run, qrels, measures, cutoffs=cutoffs, exact=False)
        scores[run.pk] = {
            "values": {name: [outcome.value(measure) for outcome in outcomes] for name, measure in named},
            "judged": {judged_key(k): [judged_share(outcome.ranking, k) for outcome in outcomes] for k in cutoffs},
            "queries": [outcome.query.external_id for outcome in outcomes],
        }
    return scores


def board_runs(collection: Collection, run_ids: Sequence) -> list[Run]:
    """The runs named, in order: at least two finished runs, each once, all of `collection`."""
    runs = collection_runs(run_ids)
    strangers = [run.pk for run in runs if run.collection_id != collection.pk]
    if strangers:
        raise InputError(f"runs {strangers} do not rank collection {collection.name}", field="runs")
    return runs


def _per_query(scores: dict) -> dict:
    """run id -> {"metrics": name -> query -> value, "judged": cutoff key -> query -> Judged@k}."""

    def by_query(entry: dict, columns: dict) -> dict:
        return {key: dict(zip(entry["queries"], values, strict=True)) for key, values in columns.items()}

    return {
        run_id: {"metrics": by_query(entry, entry["values"]), "judged": by_query(entry, entry["judged"])}
        for run_id, entry in scores.items()
    }


def best_first(means: dict[int, float]) -> list[int]:
    """Run ids best first; equal means keep their given order (sorted is stable)."""
    return sorted(means, key=lambda run_id: -means[run_id])


def _place(run_id: int, means: dict[int, float]) -> int:
    return best_first(means).index(run_id) + 1


def _unique_pairs(runs: Sequence[Run], qrels: Qrels, depth: int) -> dict[int, set[tuple[int, int]]]:
    """run id -> the judged (query, passage) pairs in its top `depth` and in no other run's."""
    tops = {run.pk: stored_hits(run, depth) for run in runs}
    unique = {}
    for run in runs:
        pairs = set()
        for query_id, passages in tops[run.pk].items():
            judged = qrels.judgments.get(query_id, {})
            others = set().union(*(tops[other.pk].get(query_id, ()) for other in runs if other.pk != run.pk))
            pairs.update((query_id, pk) for pk in passages if pk in judged and pk not in others)
        unique[run.pk] = pairs
    return unique


def kendall_tau(first: Sequence[float], second: Sequence[float]) -> float | None:
    """scipy's Kendall τ-b between two sides' values; None where it is undefined (a constant side),
    without scipy's warning about it. The leaderboard's and the judge comparison's one τ."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return finite_or_none(float(stats.kendalltau(first, second).statistic))


def leave_one_run_out(runs: Sequence[Run], qrels: Qrels, named, depth: int, full_means: dict) -> dict:
    """`leave_one_out` (run id -> {metrics, rank_change, removed_pairs}) and `kendall_tau`."""
    names = [name for name, _ in named]
    unique = _unique_pairs(runs, qrels, depth)
    entries = {}
    for run in runs:
        reduced = qrels.without(unique[run.pk], f"{qrels.label} without run {run.pk}'s own pairs at depth {depth}")
        values = query_scores([run], reduced, named, [])[run.pk]["values"]
        means = {name: column_summary(column)[0] for name, column in values.items()}
        changes = {
            name: _place(run.pk, {**full_means[name], run.pk: means[name]}) - _place(run.pk, full_means[name])
            for name in names
        }
        entries[run.pk] = {"metrics": means, "rank_change": changes, "removed_pairs": len(unique[run.pk])}
    taus = {
        name: kendall_tau(
            [full_means[name][run.pk] for run in runs], [entries[run.pk]["metrics"][name] for run in runs]
        )
        for name in names
    }
    return {"leave_one_out": entries, "kendall_tau": taus, "pool_depth": depth}


def leaderboard(
    collection: Collection,
    run_ids: Sequence,
    *,
    qrels: str | None = None,
    metrics: str | Sequence[str] | None = None,
    leave_one_out=None,
    threshold=None,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    per_query: bool = False,
) -> dict:
    """The leaderboard of `run_ids` (runs of `collection`) under `qrels`: keys `collection`,
    `qrels`, `qrels_label`, `queries`, `metrics` (the names as written), `judged_at` (metric ->
    the Judged@k key beside it), `runs` (run id ->
    {name, metrics, stderr, judged (cutoff key -> mean Judged@k), judged_stderr, coverage_warning}),
    `ranking` (metric -> run ids, best first), `tests` (compare_runs' paired tests, `metric` the
    name as written), `coverage_threshold`, `significance`; with `leave_one_out` (a pool depth)
    also `leave_one_out`, `kendall_tau` and `pool_depth` (see the module docstring); with
    `per_query`, `per_query` (run id -> {metrics: metric -> query -> value, judged: cutoff key ->
    query -> Judged@k})."""
    runs = board_runs(collection, run_ids)
    depth = _depth(leave_one_out)
    named = leaderboard_measures(metrics)
    threshold = coverage_threshold(threshold)
    judged = load_qrels(collection, qrels)
    cutoffs = judged_cutoffs(measure for _, measure in named)
    scores = query_scores(runs, judged, named, cutoffs)
    if not scores[runs[0].pk]["queries"]:
        raise InputError(f"{judged.source} judges none of collection {collection.name}'s queries", field="qrels")
    names = [name for name, _ in named]
    summaries = {run.pk: {name: column_summary(scores[run.pk]["values"][name]) for name in names} for run in runs}
    full_means = {name: {run.pk: summaries[run.pk][name][0] for run in runs} for name in names}
    entries = {}
    for run in runs:
        coverage = {key: column_summary(values) for key, values in scores[run.pk]["judged"].items()}
        judged_means = {key: mean for key, (mean, _) in coverage.items()}
        entries[run.pk] = {
            "name": run_label(run),
            "metrics": {name: summaries[run.pk][name][0] for name in names},
            "stderr": {name: summaries[run.pk][name][1] for name in names},
            "judged": judged_means,
            "judged_stderr": {key: stderr for key, (_, stderr) in coverage.items()},
            "coverage_warning": coverage_warning(judged_means, judged, threshold),
        }
    board = {
        "collection": collection.name,
        "qrels": judged.source,
        "qrels_label": judged.label,
        "queries": len(scores[runs[0].pk]["queries"]),
        "metrics": names,
        "judged_at": {name: judged_key(measure.cutoff if measure.level is None else None) for name, measure in named},
        "runs": entries,
        "ranking": {name: best_first(full_means[name]) for name in names},
        "tests": paired_tests(
            {run.pk: scores[run.pk]["values"] for run in runs}, names, permutations=permutations, seed=seed
        ),
        "coverage_threshold": threshold,
        "significance": SIGNIFICANCE,
    }
    if depth is not None:
        board.update(leave_one_run_out(runs, judged, named, depth, full_means))
    if per_query:
        board["per_query"] = _per_query(scores)
    return board
