"""Runs compared on the same queries, as IR papers report them: each run's metrics with standard
errors, and for every pair of runs and every metric a paired t-test, a paired randomisation
(sign-flip permutation) test and the Holm-Bonferroni correction across the pairs.

Decisions:
- Only queries every run can be scored on count (the runs' common evaluable queries), so the
  tests are paired; how many there are is reported.
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
from retrieval.metrics import parse_metrics, run_outcomes, standard_error
from retrieval.models import Run

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


def _runs(run_ids: Sequence) -> list[Run]:
    if len(run_ids) < 2:
        raise InputError("compare at least two runs", field="runs")
    runs = []
    for run_id in run_ids:
        try:
            runs.append(Run.objects.select_related("collection", "retriever").get(pk=int(run_id)))
        except (ValueError, TypeError, Run.DoesNotExist):
            raise InputError(f"no run with id {run_id!r}", field="runs") from None
    if len({run.pk for run in runs}) != len(runs):
        raise InputError("a run is named twice", field="runs")
    if len({run.collection_id for run in runs}) != 1:
        raise InputError("the runs belong to different collections", field="runs")
    return runs


def compare_runs(
    run_ids: Sequence,
    metrics: str | Sequence[str] | None = None,
    *,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> dict:
    """Every run's metrics on the runs' common queries and the paired tests between every pair:
    keys `runs` (run id -> {name, metrics, stderr}), `queries` (how many are common), `metrics`
    (the keys), `per_query` (run id -> metric -> values in query order), `query_ids` and `tests`
    (a list of {a, b, metric, difference (mean of a - b), t_pvalue, permutation_pvalue,
    holm_pvalue})."""
    keys = parse_metrics(metrics)
    runs = _runs(run_ids)
    values: dict[int, dict[str, dict[str, float]]] = {}
    for run in runs:
        outcomes, _ = run_outcomes(run, keys)
        values[run.pk] = {outcome.query.external_id: outcome.metrics(keys) for outcome in outcomes}
    common = [query for query in values[runs[0].pk] if all(query in values[run.pk] for run in runs)]
    if len(common) < 2:
        raise InputError(f"the runs share {len(common)} evaluable queries; at least 2 are needed", field="runs")
    columns = {run.pk: {key: [values[run.pk][query][key] for query in common] for key in keys} for run in runs}
    tests = []
    for key in keys:
        rows = []
        for a, b in itertools.combinations(runs, 2):
            first, second = columns[a.pk][key], columns[b.pk][key]
            rows.append(
                {
                    "a": a.pk,
                    "b": b.pk,
                    "metric": key,
                    "difference": float(np.mean(first) - np.mean(second)),
                    "t_pvalue": paired_t_pvalue(first, second),
                    "permutation_pvalue": permutation_pvalue(first, second, permutations=permutations, seed=seed),
                }
            )
        for row, adjusted in zip(rows, holm([row["permutation_pvalue"] for row in rows]), strict=True):
            row["holm_pvalue"] = adjusted
        tests += rows
    return {
        "queries": len(common),
        "query_ids": common,
        "metrics": list(keys),
        "runs": {
            run.pk: {
                "name": run.name or str(run.retriever),
                "metrics": {key: float(np.mean(columns[run.pk][key])) for key in keys},
                "stderr": {key: standard_error(columns[run.pk][key]) for key in keys},
            }
            for run in runs
        },
        "per_query": columns,
        "tests": tests,
    }
