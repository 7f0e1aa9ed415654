"""Runs compared on the same queries, as IR papers report them: each run's metrics with standard
errors, and for every pair of runs and every metric a paired t-test, a paired randomisation
(sign-flip permutation) test and the Holm-Bonferroni correction across the pairs.

Decisions:
- The queries are the collection's judged queries under the chosen qrels; a judged query a run
  did not rank scores 0 (trec_eval -c, ir-measures), so every run has a value for every query
  and the tests are paired; how many there are is reported.
- The permutation test flips the sign of each query's difference: exactly over all 2^n sign
  patterns when n <= EXACT_LIMIT, else over `permutations` seeded draws, with p = (hits + 1) /
  (draws + 1) so a sampled p is never 0. Two-sided: |mean| at least the observed one.
- Holm's correction is applied per metric across the pairs, to the permutation p-values (the
  test that assumes nothing about the differences' distribution).
- A pair whose differences are all zero has p = 1 in both tests (scipy gives NaN there).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from retrieval.errors import InputError
from retrieval.metrics import measures_for, run_outcomes, standard_error
from retrieval.models import Run
from retrieval.qrels_sources import load_qrels
from retrieval.selectors import require_done

EXACT_LIMIT = 16
DEFAULT_PERMUTATIONS = 10_000
# Means closer than this count as equal when the permutation test compares them (float noise).
TOLERANCE = 1e-12


def paired_t_pvalue(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test of a against b (scipy.stats.ttest_rel's)."""
    differences = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = len(differences)
    if n < 2:
        return 1.0
    spread = float(np.std(differences, ddof=1))
    mean = float(np.mean(differences))
    if spread == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / (spread / math.sqrt(n))
    return float(2 * stats.t.sf(abs(t), n - 1))


def permutation_pvalue(
    a: Sequence[float], b: Sequence[float], *, permutations: int = DEFAULT_PERMUTATIONS, seed: int = 0
) -> float:
    """Two-sided paired sign-flip test of mean(a - b): exact for small n, else seeded draws."""
    differences = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = len(differences)
    observed = abs(float(np.mean(differences))) if n else 0.0
    if n == 0 or observed == 0.0:
        return 1.0
    if n <= EXACT_LIMIT:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        means = np.abs(signs @ differences) / n
        return float(np.count_nonzero(means >= observed - TOLERANCE) / len(signs))
    generator = np.random.default_rng(seed)
    hits = 0
    for start in range(0, permutations, 1000):
        size = min(1000, permutations - start)
        signs = generator.choice((1.0, -1.0), size=(size, n))
        hits += int(np.count_nonzero(np.abs(signs @ differences) / n >= observed - TOLERANCE))
    return (hits + 1) / (permutations + 1)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the given order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda index: pvalues[index])
    adjusted = [0.0] * m
    running = 0.0
    for position, index in enumerate(order):
        running = max(running, min(1.0, (m - position) * pvalues[index]))
        adjusted[index] = running
    return adjusted


def collection_runs(run_ids: Sequence) -> list[Run]:
    """The runs named, in the order given: at least two, finished, each once, of one collection."""
    if len(run_ids) < 2:
        raise InputError("compare at least two runs", field="runs")
    runs = []
    for run_id in run_ids:
        try:
            runs.append(Run.objects.select_related("collection", "retriever").get(pk=int(run_id)))
        except (ValueError, TypeError, OverflowError, Run.DoesNotExist):
            raise InputError(f"no run with id {run_id!r}", field="runs") from None
    if len({run.pk for run in runs}) != len(runs):
        raise InputError("a run is named twice", field="runs")
    if len({run.collection_id for run in runs}) != 1:
        raise InputError("the runs belong to different collections", field="runs")
    for run in runs:
        require_done(run, field="runs")
    return runs


def run_label(run: Run) -> str:
    return run.name or str(run.retriever)


def paired_tests(
    columns: dict[int, dict[str, list[float | None]]],
    keys: Sequence[str],
    *,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> list[dict]:
    """For every metric and every pair of runs (in `columns`' order), the paired t-test and the
    permutation test of their per-query values, and Holm's correction across the pairs of each
    metric. A query without a value (mean rank on a query without a relevant passage: the same
    for every run) is left out of the pair."""
    tests = []
    for key in keys:
        rows = []
        for a, b in itertools.combinations(columns, 2):
            pairs = [(x, y) for x, y in zip(columns[a][key], columns[b][key], strict=True) if None not in (x, y)]
            first, second = [x for x, _ in pairs], [y for _, y in pairs]
            rows.append(
                {
                    "a": a,
                    "b": b,
                    "metric": key,
                    "difference": float(np.mean(first) - np.mean(second)) if pairs else 0.0,
                    "t_pvalue": paired_t_pvalue(first, second),
                    "permutation_pvalue": permutation_pvalue(first, second, permutations=permutations, seed=seed),
                }
            )
        for row, adjusted in zip(rows, holm([row["permutation_pvalue"] for row in rows]), strict=True):
            row["holm_pvalue"] = adjusted
        tests += rows
    return tests


def column_summary(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and standard error of the values that exist."""
    present = [value for value in values if value is not None]
    return (float(np.mean(present)) if present else None), standard_error(present)


def compare_runs(
    run_ids: Sequence,
    metrics: str | Sequence[str] | None = None,
    *,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    qrels: str | None = None,
) -> dict:
    """Every run's metrics on the collection's judged queries (`qrels`: a source name, default
    the collection's own; a judged query a run did not rank scores 0, so every run has every
    query) and the paired tests between every pair: keys `runs` (run id -> {name, metrics,
    stderr}), `queries`, `metrics` (the keys), `per_query` (run id -> metric -> values in query
    order), `query_ids` and `tests` (paired_tests)."""
    runs = collection_runs(run_ids)
    judged = load_qrels(runs[0].collection, qrels)
    measures = measures_for(metrics, judged)
    keys = [measure.key for measure in measures]
    outcomes = {run.pk: run_outcomes(run, judged, measures) for run in runs}
    query_ids = [outcome.query.external_id for outcome in outcomes[runs[0].pk]]
    if len(query_ids) < 2:
        raise InputError(f"the runs share {len(query_ids)} judged queries; at least 2 are needed", field="runs")
    columns = {
        run.pk: {measure.key: [outcome.value(measure) for outcome in outcomes[run.pk]] for measure in measures}
        for run in runs
    }
    summaries = {run.pk: {key: column_summary(columns[run.pk][key]) for key in keys} for run in runs}
    return {
        "queries": len(query_ids),
        "query_ids": query_ids,
        "qrels": judged.source,
        "metrics": keys,
        "runs": {
            run.pk: {
                "name": run_label(run),
                "metrics": {key: summaries[run.pk][key][0] for key in keys},
                "stderr": {key: summaries[run.pk][key][1] for key in keys},
            }
            for run in runs
        },
        "per_query": columns,
        "tests": paired_tests(columns, keys, permutations=permutations, seed=seed),
    }
