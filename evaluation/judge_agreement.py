"""Leaderboard agreement: does a judge rank systems as people do? The test the field accepts an
automatic judge on (TREC's automatic-judging tracks, the LLMJudge challenge, UMBRELA): several
runs ranked by one or more measures under the human qrels and under the judge's, compared.

Decisions:
- The values come from the leaderboard's code (evaluation.leaderboard.query_scores) on the
  same runs, so they are ir-measures on the same qrels and run files whoever made the labels:
  stored hits only, unjudged pairs not relevant. Both sides are scored over the queries of the
  human qrels: the judge's labels on other queries are left out, and a human query the judge
  labelled nothing of scores 0 under the judge (every pair of it unjudged).
- `kendall_tau` and `spearman` are scipy's kendalltau (τ-b) and spearmanr on the runs' means
  (null when one side is constant).
- `tau_ap` is τ_AP (Yilmaz, Aslam & Robertson 2008, "A new rank correlation coefficient for
  information retrieval") of the judge's ranking against the human one, the direction the
  field reports for an estimated ranking against the truth: going down the judge's ranking, for
  each run from the second on, the share of the runs above it that the humans also rank above
  it; τ_AP = 2 x the mean of those shares - 1. It weighs swaps near the top more than τ.
  `tau_ap_symmetric` averages both directions. Both rankings are strict: equal means keep the
  order the runs were named in (the leaderboard's `ranking` rule).
- `largest_rank_change`: the run whose place moves most between the human and the judge's
  ranking (the first named among equals), `change` = judge place - human place (positive: the
  judge ranks it lower).
- Confidence intervals: percentile bootstrap over queries (`bootstrap` resamples, 1,000 by
  default, numpy's default_rng(seed)): each resample draws the human queries with replacement,
  recomputes every run's mean under both qrels on the same draw, and the coefficient between
  them; resamples where it is undefined are left out (and counted).
- Label agreement: on the pairs both the humans and the judge labelled, Cohen's κ of relevant
  (label > 0) against not relevant, per query and overall (the scales may differ: UMBRELA's 0-3
  against binary qrels), the share of identical labels, and the confusion of the labels as given.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats

from evaluation import label_agreement
from evaluation.agreement import finite_or_none, percentile_interval
from evaluation.leaderboard import best_first, board_runs, kendall_tau, leaderboard_measures, query_scores
from retrieval.errors import InputError
from retrieval.input_rules import parse_integer
from retrieval.models import Collection, Run
from retrieval.qrels_sources import Qrels, load_qrels, source_name

BOOTSTRAP_SAMPLES = 1000
CONFIDENCE = 0.95
MAX_BOOTSTRAP = 100_000


def tau_ap(truth: Sequence[float], estimate: Sequence[float]) -> float | None:
    """τ_AP of the ranking by `estimate` against the ranking by `truth` (higher is better; equal
    values keep their given order); None for fewer than two items."""
    n = len(truth)
    if n < 2:
        return None
    order = best_first(dict(enumerate(estimate)))
    truth_place = {index: place for place, index in enumerate(best_first(dict(enumerate(truth))))}
    shares = [
        sum(truth_place[above] < truth_place[item] for above in order[:position]) / position
        for position, item in enumerate(order[1:], start=1)
    ]
    return 2 * sum(shares) / (n - 1) - 1


def _spearman(first: Sequence[float], second: Sequence[float]) -> float | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return finite_or_none(float(stats.spearmanr(first, second).statistic))


def _symmetric_tau_ap(first: Sequence[float], second: Sequence[float]) -> float | None:
    one, other = tau_ap(first, second), tau_ap(second, first)
    return None if one is None or other is None else (one + other) / 2


COEFFICIENTS = {
    "kendall_tau": kendall_tau,
    "tau_ap": lambda human, judge: tau_ap(human, judge),
    "spearman": _spearman,
}
INTERVAL_KEYS = {"kendall_tau": "tau_ci", "tau_ap": "tau_ap_ci", "spearman": "spearman_ci"}


def bootstrap_intervals(human: np.ndarray, judge: np.ndarray, samples: int, seed: int) -> dict:
    """Percentile intervals of each coefficient between the runs' means under `human` and
    `judge` (runs x queries), queries resampled with replacement; `undefined` counts the
    resamples where a coefficient had no value (agreement.percentile_interval leaves them out)."""
    generator = np.random.default_rng(seed)
    queries = human.shape[1]
    drawn = {key: np.full(samples, np.nan) for key in COEFFICIENTS}
    for sample in range(samples):
        pick = generator.integers(0, queries, size=queries)
        human_means, judge_means = human[:, pick].mean(axis=1), judge[:, pick].mean(axis=1)
        for key, coefficient in COEFFICIENTS.items():
            value = coefficient(human_means.tolist(), judge_means.tolist())
            if value is not None:
                drawn[key][sample] = value
    intervals = {INTERVAL_KEYS[key]: percentile_interval(values, CONFIDENCE) for key, values in drawn.items()}
    return {
        **{key: None if interval is None else [interval.low, interval.high] for key, interval in intervals.items()},
        "undefined": {key: int(np.isnan(values).sum()) for key, values in drawn.items()},
    }


def largest_rank_change(runs: Sequence[Run], human: dict[int, float], judge: dict[int, float]) -> dict:
    human_place = {run_id: place for place, run_id in enumerate(best_first(human), start=1)}
    judge_place = {run_id: place for place, run_id in enumerate(best_first(judge), start=1)}
    moved = max(runs, key=lambda run: abs(judge_place[run.pk] - human_place[run.pk]))
    return {
        "run": moved.pk,
        "name": moved.name or str(moved.retriever),
        "human_place": human_place[moved.pk],
        "judge_place": judge_place[moved.pk],
        "change": judge_place[moved.pk] - human_place[moved.pk],
    }


def on_queries_of(judge: Qrels, human: Qrels) -> Qrels:
    """The judge's qrels on exactly the human qrels' queries (a query it labelled nothing of
    judged with no pair: every measure 0 there)."""
    judgments = {query_id: dict(judge.judgments.get(query_id, {})) for query_id in human.judgments}
    return Qrels(judge.collection, judge.source, judge.label, judgments, details=judge.details, origin=judge.origin)


def _kappa(human: list[int], judge: list[int]) -> float | None:
    if not human:
        return None
    relevant = [[int(label > 0) for label in labels] for labels in (human, judge)]
    return finite_or_none(label_agreement.cohen_kappa(*relevant, labels=[0, 1]))


def label_agreement_section(human: Qrels, judge: Qrels) -> dict:
    """Cohen's κ of relevant / not relevant between the judge and the humans on the pairs both
    labelled, per query (external id) and overall; exact agreement; confusion of the labels."""
    query_names = dict(human.collection.queries.filter(pk__in=list(human.judgments)).values_list("pk", "external_id"))
    per_query, every_human, every_judge = {}, [], []
    for query_id, passages in human.judgments.items():
        judged = judge.judgments.get(query_id, {})
        shared = [pk for pk in passages if pk in judged]
        human_labels, judge_labels = [passages[pk] for pk in shared], [judged[pk] for pk in shared]
        every_human += human_labels
        every_judge += judge_labels
        per_query[query_names[query_id]] = {
            "pairs": len(shared),
            "kappa": _kappa(human_labels, judge_labels),
            "agreement": sum(h == j for h, j in zip(human_labels, judge_labels)) / len(shared) if shared else None,
        }
    human_values, judge_values = sorted(set(every_human)), sorted(set(every_judge))
    return {
        "pairs": len(every_human),
        "human_pairs": human.pairs,
        "coverage": len(every_human) / human.pairs if human.pairs else None,
        "kappa": _kappa(every_human, every_judge),
        "agreement": sum(h == j for h, j in zip(every_human, every_judge)) / len(every_human) if every_human else None,
        "confusion": {
            "rows": "human label",
            "columns": "judge label",
            "human_values": human_values,
            "judge_values": judge_values,
            "matrix": [
                [sum(1 for a, b in zip(every_human, every_judge) if a == h and b == j) for j in judge_values]
                for h in human_values
            ],
        },
        "per_query": per_query,
    }


def count_option(value, field: str, high: int) -> int:
    """A whole number 0..high given as a number or as ASCII digits (the input rule)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise InputError(f"must be a whole number, 0 to {high}, not {value!r}", field=field)
    return parse_integer(value.strip(), field=field, bounds=(0, high))


def human_qrels_for(collection: Collection, human: str | None) -> Qrels:
    """The human side: imported or study:ID[:AGGREGATE] (InputError on the field `human`)."""
    human = source_name(human)
    if human.startswith("judge:"):
        raise InputError("the human side is imported or study:ID; the judge goes in judge", field="human")
    try:
        return load_qrels(collection, human)
    except InputError as error:
        raise InputError(error.message, field="human") from None


def bootstrap_options(seed, bootstrap) -> tuple[int, int]:
    """(seed, resamples) from numbers or ASCII digits; defaults 0 and BOOTSTRAP_SAMPLES."""
    seed = 0 if seed in (None, "") else count_option(seed, "seed", 2**32 - 1)
    samples = BOOTSTRAP_SAMPLES if bootstrap in (None, "") else count_option(bootstrap, "bootstrap", MAX_BOOTSTRAP)
    return seed, samples


def compare_leaderboards(
    runs: Sequence[Run], named, human_qrels: Qrels, judge_qrels: Qrels, *, seed: int, samples: int
) -> dict:
    """The leaderboards compared, from loaded qrels: keys `queries`, `runs`, `metrics`, `bootstrap`
    (see judge_agreement, which adds the label agreement; the judge card keeps its own, `items`)."""
    judge_qrels = on_queries_of(judge_qrels, human_qrels)
    human_scores = query_scores(runs, human_qrels, named, [])
    judge_scores = query_scores(runs, judge_qrels, named, [])
    query_ids = human_scores[runs[0].pk]["queries"]
    if len(query_ids) < 2:
        raise InputError(f"{human_qrels.source} judges {len(query_ids)} queries; at least 2 are needed", field="human")
    sections = {}
    for name, _ in named:
        human_matrix = np.array([human_scores[run.pk]["values"][name] for run in runs], dtype=float)
        judge_matrix = np.array([judge_scores[run.pk]["values"][name] for run in runs], dtype=float)
        human_means = {run.pk: float(row.mean()) for run, row in zip(runs, human_matrix)}
        judge_means = {run.pk: float(row.mean()) for run, row in zip(runs, judge_matrix)}
        first, second = list(human_means.values()), list(judge_means.values())
        sections[name] = {
            "human": human_means,
            "judge": judge_means,
            "kendall_tau": kendall_tau(first, second),
            "tau_ap": tau_ap(first, second),
            "tau_ap_symmetric": _symmetric_tau_ap(first, second),
            "spearman": _spearman(first, second),
            **bootstrap_intervals(human_matrix, judge_matrix, samples, seed),
            "human_ranking": best_first(human_means),
            "judge_ranking": best_first(judge_means),
            "largest_rank_change": largest_rank_change(runs, human_means, judge_means),
        }
    return {
        "queries": len(query_ids),
        "runs": {run.pk: run.name or str(run.retriever) for run in runs},
        "metrics": sections,
        "bootstrap": {"samples": samples, "seed": seed, "confidence": CONFIDENCE, "over": "queries"},
    }


def judge_agreement(
    collection: Collection,
    run_ids: Sequence,
    *,
    judge: str,
    human: str | None = None,
    metrics: str | Sequence[str] | None = None,
    seed=None,
    bootstrap=None,
) -> dict:
    """The runs' leaderboards under the human qrels (`human`: imported or study:ID[:AGGREGATE])
    and under judge `judge`'s labels, compared per metric (see the module docstring): keys
    `collection`, `human`, `human_label`, `judge`, `judge_version`, `judge_label`, `queries`,
    `runs` (run id -> name), `metrics` (metric -> {human, judge (run id -> mean), kendall_tau,
    tau_ap, tau_ap_symmetric, spearman, tau_ci, tau_ap_ci, spearman_ci, human_ranking,
    judge_ranking, largest_rank_change}), `bootstrap` and `labels` (label_agreement_section).
    `seed` (default 0) and `bootstrap` (resamples, default BOOTSTRAP_SAMPLES) may be text."""
    seed, samples = bootstrap_options(seed, bootstrap)
    runs = board_runs(collection, run_ids)
    named = leaderboard_measures(metrics)
    human_qrels = human_qrels_for(collection, human)
    try:
        judge_qrels = load_qrels(collection, f"judge:{(judge or '').strip()}")
    except InputError as error:
        raise InputError(error.message, field="judge") from None
    origin = judge_qrels.origin
    return {
        "collection": collection.name,
        "human": human_qrels.source,
        "human_label": human_qrels.label,
        "judge": origin.name,
        "judge_version": origin.version,
        "judge_label": judge_qrels.label,
        **compare_leaderboards(runs, named, human_qrels, judge_qrels, seed=seed, samples=samples),
        "labels": label_agreement_section(human_qrels, judge_qrels),
    }
