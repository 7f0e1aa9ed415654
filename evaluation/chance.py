"""Whether the models on a proxy study do any better than guessing.

A model (a retrieval run, a judge) that picks among k candidates at random is right on 1/k of
the items. Its observed accuracy says nothing about skill when the exact (Clopper-Pearson)
binomial interval of its accuracy still holds 1/k: the items cannot tell it from a guesser. When
every model on the study is in that state, the study itself may be the problem (too few items,
near-duplicate candidates, a gold the models cannot see), and the report says so instead of
ranking the models by noise. The interval and the two-sided binomial test are scipy's.
"""

from __future__ import annotations

from scipy.stats import binomtest

from evaluation.agreement import CONFIDENCE_LEVEL

METHOD = "exact (Clopper-Pearson) binomial interval and two-sided binomial test against 1/k, scipy"


def against_chance(correct: int, answered: int, options: int, level: float = CONFIDENCE_LEVEL) -> dict:
    """One model's `correct` answers out of `answered` items of `options` candidates each: its
    accuracy, the exact interval, the binomial test's p-value and whether 1/options lies inside
    the interval (indistinguishable from chance)."""
    chance = 1.0 / options
    test = binomtest(correct, answered, chance)
    interval = test.proportion_ci(confidence_level=level, method="exact")
    return {
        "correct": correct,
        "answered": answered,
        "accuracy": correct / answered,
        "interval": {"low": float(interval.low), "high": float(interval.high)},
        "p_value": float(test.pvalue),
        "indistinguishable": bool(interval.low <= chance <= interval.high),
    }


def chance_section(models: dict, judges: dict, options: int) -> dict:
    """Every comparable run and every judge with at least one answer, tested against chance;
    `all_indistinguishable` is None when the study has no such model yet."""
    tested = {}
    for run_id, model in models.items():
        if model["comparable"] and model["covered_items"]:
            tested[f"run {run_id}"] = {
                "name": model["name"],
                **against_chance(model["correct_items"], model["covered_items"], options),
            }
    for name, judge in judges.items():
        if judge["answered_items"]:
            correct = round(judge["accuracy"] * judge["answered_items"])
            tested[f"judge {name}"] = {"name": name, **against_chance(correct, judge["answered_items"], options)}
    verdicts = [entry["indistinguishable"] for entry in tested.values()]
    return {
        "options": options,
        "chance_accuracy": 1.0 / options,
        "level": CONFIDENCE_LEVEL,
        "method": METHOD,
        "models": tested,
        "all_indistinguishable": all(verdicts) if verdicts else None,
    }
