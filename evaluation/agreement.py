"""Agreement and accuracy statistics for choose-one-of-k judgments, as plain numpy functions.

Inputs are either a counts table (items x categories: how many raters put item i in category
j) or per-item lists of choices. For proxy studies the category is the option POSITION shown,
because every item has its own candidate set (RELiC, after Randolph 2010).

Every item-level statistic is written once, as a function of per-item *weights* (how often each
item is counted). The point estimate uses weight 1 for every item; a bootstrap resample is just
another row of weights (how often each item was drawn). That keeps one code path for both and
makes the bootstrap a single matrix product instead of a Python loop over resamples.

Varying numbers of raters per item: `fleiss_kappa` uses the usual generalisation, with each
item's observed agreement computed over its own rater pairs and the chance agreement from the
pooled share of each category among all ratings. With equal rater counts this is exactly Fleiss
(1971) (and statsmodels' `fleiss_kappa(method="fleiss")`). Items with fewer than two ratings
have no rater pairs and are left out of every kappa. The study report itself only feeds items
with the full number of judgments, so there the counts are always equal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.stats import binom

CONFIDENCE_LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN: an undefined statistic is null."""
    return None if value is None or math.isnan(value) else float(value)


def counts_table(choices_per_item: Sequence[Sequence[int]], categories: int) -> np.ndarray:
    """Items x categories counts from per-item lists of chosen categories (0..categories-1)."""
    table = np.zeros((len(choices_per_item), categories), dtype=np.int64)
    for row, choices in enumerate(choices_per_item):
        for choice in choices:
            if not 0 <= choice < categories:
                raise ValueError(f"item {row}: choice {choice} is outside 0..{categories - 1}")
            table[row, choice] += 1
    return table


def unit_weights(items: int) -> np.ndarray:
    """One row of weights that counts every item once: the point estimate."""
    return np.ones((1, items), dtype=np.float64)


def bootstrap_weights(items: int, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Resamples x items: how many times each item was drawn in each percentile-bootstrap resample."""
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, items, size=(resamples, items))
    offsets = np.arange(resamples)[:, None] * items
    return (
        np.bincount((drawn + offsets).ravel(), minlength=resamples * items).reshape(resamples, items).astype(np.float64)
    )


def _safe_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator with NaN where the denominator is 0 (statistic undefined)."""
    numerator, denominator = np.broadcast_arrays(
        np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    )
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def _pair_agreement(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item: share of agreeing ordered rater pairs, and whether the item has any pair."""
    raters = counts.sum(axis=1)
    has_pairs = raters >= 2
    agreeing_pairs = (counts * (counts - 1)).sum(axis=1)
    return _safe_ratio(agreeing_pairs, raters * (raters - 1)), has_pairs


def weighted_kappa(counts: np.ndarray, weights: np.ndarray, chance: str) -> np.ndarray:
    """Fleiss ("fleiss": chance from the category margins) or Randolph ("randolph": chance 1/k)
    kappa for each row of item weights."""
    counts = np.asarray(counts, dtype=np.float64)
    agreement, has_pairs = _pair_agreement(counts)
    weights = weights * has_pairs
    observed = _safe_ratio(weights @ np.nan_to_num(agreement), weights.sum(axis=1))
    if chance == "fleiss":
        ratings_per_category = weights @ counts
        shares = _safe_ratio(ratings_per_category, ratings_per_category.sum(axis=1, keepdims=True))
        expected = (shares**2).sum(axis=1)
    elif chance == "randolph":
        expected = np.full(weights.shape[0], 1.0 / counts.shape[1])
    else:
        raise ValueError(f"unknown chance model {chance!r}: use 'fleiss' or 'randolph'")
    return _safe_ratio(observed - expected, 1.0 - expected)


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mean of a per-item 0/1 or real vector for each row of item weights."""
    return _safe_ratio(weights @ np.asarray(values, dtype=np.float64), weights.sum(axis=1))


def fleiss_kappa(counts) -> float:
    """Fleiss' kappa (generalised to varying rater counts, see the module docstring); NaN when
    chance agreement is 1 (every rating in one category)."""
    counts = np.asarray(counts)
    return float(weighted_kappa(counts, unit_weights(len(counts)), "fleiss")[0])


def randolph_kappa(counts) -> float:
    """Randolph's free-marginal multirater kappa: chance agreement 1/k."""
    counts = np.asarray(counts)
    return float(weighted_kappa(counts, unit_weights(len(counts)), "randolph")[0])


def all_agree_flags(counts) -> np.ndarray:
    """Per item: every rater chose the same category."""
    counts = np.asarray(counts)
    return counts.max(axis=1) == counts.sum(axis=1)


def none_agree_flags(counts) -> np.ndarray:
    """Per item: every rater chose a different category."""
    return np.asarray(counts).max(axis=1) <= 1


def majority_threshold(raters: int) -> int:
    """Smallest count that is strictly more than half of `raters`: ceil((n + 1) / 2)."""
    return raters // 2 + 1


def majority_correct_flags(counts, gold_categories) -> np.ndarray:
    """Per item: strictly more than half of its raters chose the gold category."""
    counts = np.asarray(counts)
    gold_votes = counts[np.arange(len(counts)), np.asarray(gold_categories, dtype=np.int64)]
    return gold_votes >= majority_threshold(counts.sum(axis=1))


def share(flags) -> float:
    """Share of true values; NaN for no items."""
    flags = np.asarray(flags, dtype=np.float64)
    return float(flags.mean()) if flags.size else math.nan


def annotator_accuracy(judgments: Sequence[tuple[str, bool]]) -> dict[str, dict]:
    """annotator -> {"judgments", "correct", "accuracy"} from (annotator, chose gold) pairs."""
    tallies: dict[str, list[int]] = {}
    for annotator, correct in judgments:
        tally = tallies.setdefault(annotator, [0, 0])
        tally[0] += 1
        tally[1] += bool(correct)
    return {
        annotator: {"judgments": total, "correct": correct, "accuracy": correct / total}
        for annotator, (total, correct) in sorted(tallies.items())
    }


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def percentile_interval(samples: np.ndarray, level: float = CONFIDENCE_LEVEL) -> Interval | None:
    """Percentile interval of bootstrap samples, ignoring resamples where the statistic is
    undefined; None when it is undefined in all of them."""
    samples = np.asarray(samples, dtype=np.float64)
    samples = samples[~np.isnan(samples)]
    if not samples.size:
        return None
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(samples, [tail, 100.0 - tail])
    return Interval(float(low), float(high))


def bootstrap_interval(
    statistic: Callable[[np.ndarray], np.ndarray],
    items: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = CONFIDENCE_LEVEL,
) -> Interval | None:
    """Seeded percentile-bootstrap interval over items. `statistic(weights)` maps a
    (resamples x items) weight matrix to one value per resample."""
    if items == 0:
        return None
    return percentile_interval(statistic(bootstrap_weights(items, resamples, seed)), level)


@dataclass(frozen=True)
class McNemarResult:
    first_only: int
    second_only: int
    p_value: float


def mcnemar_exact(first_correct, second_correct) -> McNemarResult:
    """Exact two-sided McNemar test on paired 0/1 outcomes: a binomial(b + c, 1/2) test on the
    discordant pairs, p = min(1, 2 * P(X <= min(b, c))), as statsmodels' mcnemar(exact=True)."""
    first = np.asarray(first_correct, dtype=bool)
    second = np.asarray(second_correct, dtype=bool)
    if first.shape != second.shape:
        raise ValueError("paired outcomes must have the same length")
    first_only = int((first & ~second).sum())
    second_only = int((~first & second).sum())
    discordant = first_only + second_only
    tail = sum(math.comb(discordant, i) for i in range(min(first_only, second_only) + 1))
    p_value = min(Fraction(1), Fraction(2 * tail, 2**discordant))
    return McNemarResult(first_only, second_only, float(p_value))


@dataclass(frozen=True)
class RandomBaseline:
    """What annotators who pick uniformly at random among k options would score."""

    options: int
    raters: int
    fleiss_kappa: float
    randolph_kappa: float
    all_agree: float
    none_agree: float
    majority_accuracy: float
    accuracy: float


def random_baseline(options: int, raters: int) -> RandomBaseline:
    """Exact values for `raters` independent uniform choices among `options`.

    all agree = k^(1-n); none agree = k!/((k-n)! k^n) (0 when n > k); majority accuracy =
    P(Binomial(n, 1/k) >= floor(n/2) + 1). Both kappas are 0: the expected pair agreement is
    exactly 1/k, which is Randolph's chance term and, in the population, Fleiss' (uniform
    margins).
    """
    if options < 1 or raters < 1:
        raise ValueError("a random baseline needs at least one option and one rater")
    p = Fraction(1, options)
    all_agree = Fraction(1, options ** (raters - 1))
    none_agree = Fraction(math.perm(options, raters), options**raters)
    majority = sum(
        math.comb(raters, votes) * p**votes * (1 - p) ** (raters - votes)
        for votes in range(majority_threshold(raters), raters + 1)
    )
    return RandomBaseline(
        options=options,
        raters=raters,
        fleiss_kappa=0.0,
        randolph_kappa=0.0,
        all_agree=float(all_agree),
        none_agree=float(none_agree),
        majority_accuracy=float(majority),
        accuracy=float(p),
    )


def random_accuracy_range(options: int, items: int, level: float = CONFIDENCE_LEVEL) -> Interval | None:
    """Central `level` range of the accuracy a single random guesser reaches on `items` items
    (binomial quantiles): the error bar for "random" beside the humans and the models."""
    if items == 0:
        return None
    tail = (1.0 - level) / 2.0
    low, high = binom.ppf([tail, 1.0 - tail], items, 1.0 / options)
    return Interval(float(low) / items, float(high) / items)
