"""How close runs come to a preference study's human ranking: compatibility (Clarke, Smucker and
Vtyurina, "Offline evaluation by maximum similarity to an ideal ranking", CIKM 2020; normalised
as in "Assessing top-k preferences", TOIS 2021) and Kendall's tau.

Compatibility of a ranking R with preference grades G at persistence p and depth D: the ideal
ranking I lists the passages with a grade above 0, highest grade first, passages of equal grade
in the order R puts them (those R does not return after, in external id order): among the ideal
rankings the grades allow, the one most like R. Then

    RBO_D(R, I) = sum_{d=1..D} p^(d-1) |R[:d] & I[:d]| / d   (over the same weights' sum)
    compatibility = RBO_D(R, I) / RBO_D(I, I)

so a run that is itself an ideal ranking scores 1. Clarke et al.'s own script evaluates to depth
1000 (the default here); ir-measures' Compat to the longer of R and I. A query the run has no
ranking for retrieved nothing and scores 0; a query without a passage graded above 0 is left out.

Kendall's tau (tau-b, scipy) compares the human scores of a query's scored passages with the
order the run gives the same passages: its scores, a passage it did not return counting below
every one it did (tied with the others it missed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy.stats import kendalltau

from annotation.models import Study
from evaluation.preference_scores import preference_grades, preference_scores
from retrieval.errors import InputError
from retrieval.models import Hit, Run
from retrieval.selectors import require_done

DEFAULT_PERSISTENCE = 0.95
DEFAULT_DEPTH = 1000


def ideal_ranking(ranking: Sequence[str], grades: dict[str, float]) -> list[str]:
    """The ideal ranking most similar to `ranking` under `grades` (see the module docstring)."""
    place = {passage: index for index, passage in enumerate(ranking)}
    graded = sorted((passage for passage, grade in grades.items() if grade > 0))
    return sorted(graded, key=lambda passage: (-grades[passage], place.get(passage, len(ranking))))


def rank_biased_overlap(ranking: Sequence[str], ideal: Sequence[str], persistence: float, depth: int) -> float:
    """sum_{d=1..depth} p^(d-1) |ranking[:d] & ideal[:d]| / d, over the sum of the weights (the
    overlap kept up as each list grows by one, so depth d costs d steps)."""
    seen_ranking, seen_ideal = set(), set()
    overlap = 0
    total = weights = 0.0
    weight = 1.0
    for d in range(depth):
        if d < len(ranking):
            seen_ranking.add(ranking[d])
            overlap += ranking[d] in seen_ideal
        if d < len(ideal):
            seen_ideal.add(ideal[d])
            overlap += ideal[d] in seen_ranking
        total += weight * overlap / (d + 1)
        weights += weight
        weight *= persistence
    return total / weights


def compatibility(ranking: Sequence[str], grades: dict[str, float], persistence: float, depth: int) -> float | None:
    """The compatibility of `ranking` with `grades`, or None when no passage is graded above 0."""
    ideal = ideal_ranking(ranking, grades)
    if not ideal:
        return None
    return rank_biased_overlap(ranking, ideal, persistence, depth) / rank_biased_overlap(
        ideal, ideal, persistence, depth
    )


def _check(persistence: float, depth: int) -> None:
    if not (isinstance(persistence, float | int) and 0 < persistence < 1):
        raise InputError(f"must be between 0 and 1 (exclusive), got {persistence}", field="p")
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 100_000:
        raise InputError(f"must be between 1 and 100000, got {depth}", field="depth")


def run_rankings(run: Run, query_ids: Sequence[int]) -> dict[int, list[tuple[str, float]]]:
    """query id -> the run's (passage external id, score) in rank order."""
    found: dict[int, list[tuple[str, float]]] = {query_id: [] for query_id in query_ids}
    hits = (
        Hit.objects.filter(run=run, query_id__in=query_ids)
        .order_by("query_id", "rank")
        .values_list("query_id", "passage__external_id", "score")
    )
    for query_id, passage, score in hits.iterator(10_000):
        found[query_id].append((passage, score))
    return found


def compare_with_preferences(
    study: Study,
    runs: Sequence[Run],
    *,
    persistence: float = DEFAULT_PERSISTENCE,
    depth: int = DEFAULT_DEPTH,
    model: str | None = None,
    alpha: float | None = None,
) -> dict:
    """Each run's compatibility with the study's preference grades and Kendall's tau against its
    human scores, per query and averaged over the queries that have them."""
    _check(persistence, depth)
    options = {} if alpha is None else {"alpha": alpha}
    report = preference_scores(study, model=model, resamples=0, **options)
    query_ids = dict(
        study.collection.queries.filter(external_id__in=report["queries"]).values_list("external_id", "pk")
    )
    compared = {}
    for run in runs:
        require_done(run, "runs")
        if run.collection_id != study.collection_id:
            raise InputError(f"run {run.pk} ranks another collection than study {study.pk}", field="runs")
        rankings = run_rankings(run, list(query_ids.values()))
        per_query = {}
        for query, section in report["queries"].items():
            ranked = rankings[query_ids[query]]
            per_query[query] = {
                "compatibility": compatibility(
                    [passage for passage, _ in ranked], preference_grades(section), persistence, depth
                ),
                "kendall_tau": human_order_tau(section["scores"], dict(ranked)),
            }
        compared[str(run.pk)] = {
            "run": run.pk,
            "name": run.name or str(run.retriever),
            "compatibility": _mean(entry["compatibility"] for entry in per_query.values()),
            "kendall_tau": _mean(entry["kendall_tau"] for entry in per_query.values()),
            "per_query": per_query,
        }
    return {
        "study": study.pk,
        "model": report["model"],
        "p": persistence,
        "depth": depth,
        "queries": len(report["queries"]),
        "runs": compared,
    }


def human_order_tau(human: dict[str, float], system: dict[str, float]) -> float | None:
    """Kendall's tau-b between the human scores and the run's order of the same passages (a
    passage the run missed below all it returned); None under two passages or without variation."""
    passages = sorted(human)
    if len(passages) < 2:
        return None
    floor = min(system.values(), default=0.0) - 1.0
    tau = kendalltau([human[p] for p in passages], [system.get(p, floor) for p in passages]).statistic
    return None if tau is None or math.isnan(tau) else float(tau)


def _mean(values) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None
