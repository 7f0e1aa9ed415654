"""Agreement and accuracy statistics for choose-one-of-k judgments, as plain numpy functions.

Inputs are either a counts table (items x categories: how many raters put item i in category
j) or per-item lists of choices. For proxy studies the category is the option POSITION shown,
because every item has its own candidate set (RELiC, after Randolph 2010).

Every item-level statistic is written once, as a function of per-item *weights* (how often each
item is counted). The point estimate uses weight 1 for every item; a bootstrap resample is just
another row of weights (how often each item was drawn). That keeps one code path for both and
makes the bootstrap a single matrix product instead of a Python loop over resamples.

The bootstrap resamples item *types*: items whose every input to the statistics is the same
(a proxy item is its votes per position and whether the majority chose the gold: at most a few
dozen types at any study size) are interchangeable, so drawing n items uniformly with
replacement gives each type a Multinomial(n, type share) count: the same distribution as
resampling the items one by one, drawn in resamples x types instead of resamples x items.
A 100K-item study's intervals take milliseconds and a few MB instead of seconds and gigabytes.

Varying numbers of raters per item: `fleiss_kappa` uses the usual generalisation, with each
item's observed agreement computed over its own rater pairs and the chance agreement from the
pooled share of each category among all ratings. With equal rater counts this is exactly Fleiss
(1971) (and statsmodels' `fleiss_kappa(method="fleiss")`). Items with fewer than two ratings
have no rater pairs and are left out of every kappa. The study report itself only feeds items
with the full number of judgments, so there the counts are always equal.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.stats import binom

CONFIDENCE_LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
# Resample x type cells per chunk of bootstrap weights (16 MB of float64).
BOOTSTRAP_CHUNK_CELLS = 1 << 21


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN: an undefined statistic is null."""
    return None if value is None or math.isnan(value) else float(value)


def counts_table(choices_per_item: Sequence[Sequence[int]], categories: int) -> np.ndarray:
    """Items x categories counts from per-item lists of chosen categories (0..categories-1)."""
    per_item = np.fromiter(map(len, choices_per_item), dtype=np.int64, count=len(choices_per_item))
    choices = np.fromiter(itertools.chain.from_iterable(choices_per_item), dtype=np.int64, count=int(per_item.sum()))
    rows = np.repeat(np.arange(len(choices_per_item), dtype=np.int64), per_item)
    return counts_from_pairs(rows, choices, len(choices_per_item), categories)


def counts_from_pairs(rows: np.ndarray, choices: np.ndarray, items: int, categories: int) -> np.ndarray:
    """Items x categories counts from parallel arrays of (item row, chosen category) pairs."""
    outside = np.flatnonzero((choices < 0) | (choices >= categories))
    if outside.size:
        row, choice = int(rows[outside[0]]), int(choices[outside[0]])
        raise ValueError(f"item {row}: choice {choice} is outside 0..{categories - 1}")
    cells = np.bincount(rows * categories + choices, minlength=items * categories)
    return cells.reshape(items, categories).astype(np.int64)


def unit_weights(items: int) -> np.ndarray:
    """One row of weights that counts every item once: the point estimate."""
    return np.ones((1, items), dtype=np.float64)


@dataclass(frozen=True)
class ItemTypes:
    """Items grouped by their values: `representatives` (one item index per type, in first
    occurrence order) and `multiplicities` (items of each type)."""

    representatives: np.ndarray
    multiplicities: np.ndarray


def item_types(*per_item: np.ndarray) -> ItemTypes:
    """The types of items described by per-item arrays (vectors or items x k tables). A stable
    lexsort of the rows and a scan for changes: np.unique(axis=0) gives the same groups but
    sorts the rows as opaque records, about ten times slower."""
    items = len(per_item[0])
    if not items:
        return ItemTypes(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    table = np.hstack([np.asarray(values, dtype=np.float64).reshape(items, -1) for values in per_item])
    order = np.lexsort(table.T[::-1])
    ordered = table[order]
    starts = np.flatnonzero(np.r_[True, (ordered[1:] != ordered[:-1]).any(axis=1)])
    # Stable: each group's first row in sorted order is its first occurrence.
    first, counts = order[starts], np.diff(np.r_[starts, items])
    by_occurrence = np.argsort(first)
    return ItemTypes(first[by_occurrence], counts[by_occurrence])


def bootstrap_weights(
    multiplicities: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """Resamples x types: how many of the n items drawn with replacement in each percentile-
    bootstrap resample are of each type (Multinomial(n, multiplicities / n))."""
    return np.concatenate(list(_bootstrap_weight_chunks(np.asarray(multiplicities), resamples, seed)))


def _bootstrap_weight_chunks(multiplicities: np.ndarray, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """bootstrap_weights' rows, a few at a time (about BOOTSTRAP_CHUNK_CELLS cells each), so
    memory stays bounded even when every item is its own type."""
    rng = np.random.default_rng(seed)
    items = int(multiplicities.sum())
    shares = multiplicities / items
    rows_per_chunk = max(1, BOOTSTRAP_CHUNK_CELLS // max(1, len(multiplicities)))
    for start in range(0, resamples, rows_per_chunk):
        yield rng.multinomial(items, shares, size=min(rows_per_chunk, resamples - start)).astype(np.float64)


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
    codes: dict[str, int] = {}
    annotators = np.fromiter((codes.setdefault(name, len(codes)) for name, _ in judgments), dtype=np.int64)
    correct = np.fromiter((bool(chose_gold) for _, chose_gold in judgments), dtype=bool)
    return annotator_accuracy_columns(tuple(codes), annotators, correct)


def annotator_accuracy_columns(names: Sequence[str], annotators: np.ndarray, correct: np.ndarray) -> dict[str, dict]:
    """annotator_accuracy from parallel arrays: `annotators` indexes `names`, `correct` says
    whether each judgment chose the gold. Annotators without judgments are left out."""
    totals = np.bincount(annotators, minlength=len(names))
    rights = np.bincount(annotators[correct], minlength=len(names))
    return {
        name: {
            "judgments": int(totals[code]),
            "correct": int(rights[code]),
            "accuracy": int(rights[code]) / int(totals[code]),
        }
        for name, code in sorted((name, code) for code, name in enumerate(names) if totals[code])
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


def bootstrap_intervals(
    statistics: Mapping[str, Callable[[np.ndarray], np.ndarray]],
    multiplicities: np.ndarray,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = CONFIDENCE_LEVEL,
) -> dict[str, Interval | None]:
    """Seeded percentile-bootstrap intervals over items for several statistics of the same items,
    from one pass over the resamples. `statistic(weights)` maps a (rows x types) weight matrix to
    one value per row (the statistic computed on the types' representatives, see item_types);
    it sees the resamples a chunk of rows at a time, so memory stays bounded."""
    multiplicities = np.asarray(multiplicities, dtype=np.int64)
    if multiplicities.sum() == 0:
        return dict.fromkeys(statistics)
    samples = {name: np.empty(resamples) for name in statistics}
    start = 0
    for weights in _bootstrap_weight_chunks(multiplicities, resamples, seed):
        for name, statistic in statistics.items():
            samples[name][start : start + len(weights)] = statistic(weights)
        start += len(weights)
    return {name: percentile_interval(values, level) for name, values in samples.items()}


def bootstrap_interval(
    statistic: Callable[[np.ndarray], np.ndarray],
    multiplicities: np.ndarray,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = CONFIDENCE_LEVEL,
) -> Interval | None:
    """One statistic's seeded percentile-bootstrap interval (see bootstrap_intervals)."""
    return bootstrap_intervals({"statistic": statistic}, multiplicities, resamples, seed, level)["statistic"]


def bootstrap_share_interval(
    flags: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED, level: float = CONFIDENCE_LEVEL
) -> Interval | None:
    """Percentile-bootstrap interval of the share of true (or the mean of real) per-item values."""
    values = np.asarray(flags, dtype=np.float64)
    types = item_types(values)
    return bootstrap_interval(
        lambda weights: weighted_mean(values[types.representatives], weights),
        types.multiplicities,
        resamples,
        seed,
        level,
    )


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
