"""Agreement, aggregation and correlation statistics for relevance and quotability studies.

Pure numpy/scipy functions with no database access, so that study reports can feed them
exported judgments and every number can be recomputed outside the platform.

Two input shapes recur:
- a *reliability matrix*: raters x units, float, NaN where a rater did not judge a unit
  (Krippendorff's layout, also the `krippendorff` package's). `reliability_matrix` builds one
  from (rater, unit, value) triples. Rater identity matters for Cohen's kappa and alpha.
- *labels per item*: one list of labels per item, rater identity dropped. Enough for Fleiss'
  kappa, majority votes and per-item means.

Conventions shared with `evaluation.agreement`: malformed input raises ValueError naming the
offending item or position; a statistic that is undefined on well-formed data (no unit rated
twice, every rating identical) is NaN, not an exception, so a report can show "undefined".
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from annotation.majority import is_missing, sorted_labels
from evaluation.agreement import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE_LEVEL,
    Interval,
    bootstrap_share_interval,
    counts_table,
    fleiss_kappa,
)

MEASUREMENT_LEVELS = ("nominal", "ordinal", "interval", "ratio")
KAPPA_WEIGHTS = (None, "linear", "quadratic")
UNEQUAL_RATER_POLICIES = ("drop", "generalised")
INTERVAL_METHODS = ("wilson", "bootstrap")


# --- reliability matrix -------------------------------------------------------------------


@dataclass(frozen=True)
class ReliabilityMatrix:
    """Ratings laid out raters x units (NaN = not rated), with the ids of the rows and columns."""

    values: np.ndarray
    raters: tuple
    units: tuple


def reliability_matrix(ratings: Iterable[tuple[Hashable, Hashable, float]]) -> ReliabilityMatrix:
    """Raters x units matrix from (rater, unit, value) triples, rows and columns in first-seen order.

    This is the bridge from judgment rows to alpha and pairwise kappa; a rater who judged a
    unit twice is an error, because silently keeping one of the two would change the statistic.
    """
    rater_index: dict[Hashable, int] = {}
    unit_index: dict[Hashable, int] = {}
    cells: dict[tuple[int, int], float] = {}
    for position, (rater, unit, value) in enumerate(ratings):
        if is_missing(value):
            raise ValueError(f"rating {position}: rater {rater!r} on unit {unit!r} has no value; leave it out instead")
        try:
            number = float(value)
        except (TypeError, ValueError) as error:
            raise ValueError(f"rating {position}: value {value!r} is not a number; encode labels as numbers") from error
        if not math.isfinite(number):
            raise ValueError(f"rating {position}: value {value!r} is not finite")
        cell = (rater_index.setdefault(rater, len(rater_index)), unit_index.setdefault(unit, len(unit_index)))
        if cell in cells:
            raise ValueError(f"rating {position}: rater {rater!r} rated unit {unit!r} more than once")
        cells[cell] = number
    values = np.full((len(rater_index), len(unit_index)), np.nan)
    for (row, column), number in cells.items():
        values[row, column] = number
    return ReliabilityMatrix(values, tuple(rater_index), tuple(unit_index))


def _as_reliability_data(data) -> np.ndarray:
    """Validated float copy of a raters x units matrix (NaN or None = missing)."""
    try:
        values = np.array(data, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"reliability data must be numeric, missing as NaN or None ({error})") from error
    if values.ndim != 2:
        raise ValueError(f"reliability data must be a raters x units matrix, got {values.ndim} dimension(s)")
    if np.isinf(values).any():
        raise ValueError("reliability data contains an infinite value")
    return values


# --- Krippendorff's alpha -----------------------------------------------------------------


@dataclass(frozen=True)
class Coincidences:
    """Krippendorff's coincidence matrix: matrix[c, k] counts the (c, k) value pairs that fall
    within the same unit, each unit's pairs weighted 1 / (ratings in the unit - 1) so that every
    pairable rating contributes exactly 1 in total. Units rated once contribute nothing."""

    values: np.ndarray
    matrix: np.ndarray

    @property
    def margins(self) -> np.ndarray:
        """n_c: how many pairable ratings have each value."""
        return self.matrix.sum(axis=0)


def coincidence_matrix(data) -> Coincidences:
    """Coincidences of a raters x units reliability matrix over its observed values (sorted)."""
    values = _as_reliability_data(data)
    rated = ~np.isnan(values)
    domain = np.unique(values[rated])
    counts = np.zeros((values.shape[1], domain.size))
    unit_of_rating = np.broadcast_to(np.arange(values.shape[1]), values.shape)[rated]
    np.add.at(counts, (unit_of_rating, np.searchsorted(domain, values[rated])), 1.0)
    ratings_per_unit = counts.sum(axis=1)
    pairable = ratings_per_unit >= 2
    counts = counts[pairable]
    scaled = counts / (ratings_per_unit[pairable] - 1.0)[:, None]
    matrix = scaled.T @ counts - np.diag(scaled.sum(axis=0))
    return Coincidences(domain, matrix)


def _distance_matrix(values: np.ndarray, margins: np.ndarray, level: str) -> np.ndarray:
    """Krippendorff's squared difference delta^2(c, k) between every pair of values, for a
    level already checked against MEASUREMENT_LEVELS."""
    if level == "nominal":
        return 1.0 - np.eye(values.size)
    if level == "ordinal":
        # Distance = the number of pairable ratings ranked between c and k, counting the two
        # end values by half: only the order of values matters, not their spacing.
        index = np.arange(values.size)
        low, high = np.minimum.outer(index, index), np.maximum.outer(index, index)
        cumulative = np.concatenate([[0.0], np.cumsum(margins)])
        between = cumulative[high + 1] - cumulative[low] - (margins[low] + margins[high]) / 2.0
        return between**2
    if level == "interval":
        return np.subtract.outer(values, values) ** 2
    # ratio: differences relative to the values' size, 0 between two zeros.
    total = np.add.outer(values, values)
    ratio = np.divide(np.subtract.outer(values, values), total, out=np.zeros_like(total), where=total != 0)
    return ratio**2


def krippendorff_alpha(data, level: str = "nominal") -> float:
    """Krippendorff's alpha = 1 - D_o / D_e from a raters x units matrix (NaN = missing).

    Computed from the coincidence matrix o and its margins n_c (n pairable ratings in all):
    alpha = 1 - (n - 1) * sum(o * delta^2) / sum(n_c n_k delta^2). Alpha is the agreement
    statistic for scales because it takes any number of raters, missing ratings, and a
    distance that fits the scale (nominal, ordinal, interval, ratio). NaN when no unit has
    two ratings or every pairable rating has the same value (no disagreement is expected,
    so none can be beaten).
    """
    if level not in MEASUREMENT_LEVELS:
        raise ValueError(f"unknown level of measurement {level!r}: use one of {', '.join(MEASUREMENT_LEVELS)}")
    coincidences = coincidence_matrix(data)
    if level == "ratio" and (coincidences.values < 0).any():
        raise ValueError("ratio-level alpha needs non-negative values (a ratio scale has an absolute zero)")
    margins = coincidences.margins
    pairable = margins.sum()
    distances = _distance_matrix(coincidences.values, margins, level)
    chance_pairs_disagreement = float(margins @ distances @ margins)
    if pairable == 0 or chance_pairs_disagreement == 0:
        return math.nan
    observed_pairs_disagreement = float((coincidences.matrix * distances).sum())
    return 1.0 - (pairable - 1.0) * observed_pairs_disagreement / chance_pairs_disagreement


# --- Cohen's kappa ------------------------------------------------------------------------


def _kappa_weight_matrix(categories: int, weights: str | None) -> np.ndarray:
    """Disagreement weights by distance between category positions on the ordered scale."""
    if weights not in KAPPA_WEIGHTS:
        raise ValueError(f"unknown kappa weights {weights!r}: use None, 'linear' or 'quadratic'")
    distance = np.abs(np.subtract.outer(np.arange(categories), np.arange(categories))).astype(np.float64)
    if weights is None:
        return (distance > 0).astype(np.float64)
    return distance if weights == "linear" else distance**2


def cohen_kappa(first: Sequence, second: Sequence, weights: str | None = None, labels: Sequence | None = None) -> float:
    """Cohen's kappa between two raters who labelled the same items, in the same order.

    weights=None is the nominal kappa; "linear" and "quadratic" weight a disagreement by the
    distance |i - j| or (i - j)^2 between the two labels' positions in `labels` (ordered scale),
    so near misses on a grade scale cost less. `labels` defaults to every label either rater
    used, sorted; pass the full scale so unused grades still count for the weights. Same
    definition as scikit-learn's cohen_kappa_score. NaN when chance disagreement is 0 (both
    raters used one and the same label throughout).
    """
    if len(first) != len(second):
        raise ValueError(f"the two raters labelled different numbers of items ({len(first)} and {len(second)})")
    if not len(first):
        raise ValueError("Cohen's kappa needs at least one item labelled by both raters")
    for rater, sequence in (("first", first), ("second", second)):
        for position, label in enumerate(sequence):
            if is_missing(label):
                raise ValueError(f"{rater} rater, item {position}: missing label; keep only items both raters labelled")
    scale = (
        list(labels)
        if labels is not None
        else sorted_labels(itertools.chain(first, second), "the raters' labels (give `labels` in scale order)")
    )
    position_of = {label: position for position, label in enumerate(scale)}
    if len(position_of) != len(scale):
        raise ValueError("`labels` repeats a label")
    codes = []
    for rater, sequence in (("first", first), ("second", second)):
        try:
            codes.append(np.array([position_of[label] for label in sequence], dtype=np.int64))
        except KeyError as error:
            raise ValueError(f"{rater} rater used label {error.args[0]!r}, which is not in `labels`") from error
    categories = len(scale)
    confusion = np.bincount(codes[0] * categories + codes[1], minlength=categories**2).reshape(categories, categories)
    expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / confusion.sum()
    disagreement_weights = _kappa_weight_matrix(categories, weights)
    chance_disagreement = float((disagreement_weights * expected).sum())
    if chance_disagreement == 0:
        return math.nan
    return 1.0 - float((disagreement_weights * confusion).sum()) / chance_disagreement


@dataclass(frozen=True)
class RaterPairKappa:
    first: int
    second: int
    items: int
    kappa: float


@dataclass(frozen=True)
class PairwiseKappa:
    """Mean of Cohen's kappa over rater pairs (Light's kappa), with every pair's own value."""

    mean: float
    pairs: tuple[RaterPairKappa, ...]

    @property
    def pairs_averaged(self) -> int:
        return sum(not math.isnan(pair.kappa) for pair in self.pairs)


def mean_pairwise_cohen_kappa(data, weights: str | None = None, labels: Sequence | None = None) -> PairwiseKappa:
    """Cohen's kappa for every pair of raters (rows of a raters x units matrix, NaN = missing)
    on the units both rated, and their unweighted mean.

    Pairs that share no unit are not listed; pairs whose kappa is undefined (NaN) are listed
    but left out of the mean, since they carry no information about agreement beyond chance.
    All pairs use one scale, `labels` or else every value in the matrix, so that weighted
    kappas of different pairs are comparable. NaN mean when no pair has a defined kappa.
    """
    values = _as_reliability_data(data)
    if values.shape[0] < 2:
        raise ValueError("pairwise kappa needs at least two raters (rows)")
    scale = list(labels) if labels is not None else np.unique(values[~np.isnan(values)]).tolist()
    rated = ~np.isnan(values)
    pairs = []
    for first, second in itertools.combinations(range(values.shape[0]), 2):
        shared = rated[first] & rated[second]
        if shared.any():
            kappa = cohen_kappa(values[first, shared].tolist(), values[second, shared].tolist(), weights, scale)
            pairs.append(RaterPairKappa(first, second, int(shared.sum()), kappa))
    defined = [pair.kappa for pair in pairs if not math.isnan(pair.kappa)]
    return PairwiseKappa(float(np.mean(defined)) if defined else math.nan, tuple(pairs))


# --- Fleiss' kappa from labels per item ------------------------------------------------------


@dataclass(frozen=True)
class FleissKappaFromLabels:
    kappa: float
    categories: tuple
    items_used: int
    items_left_out: tuple[int, ...]
    raters_per_item: int | None


def _modal_rater_count(sizes: Sequence[int]) -> int | None:
    """Most common number of labels among items with at least two; the larger on a tie, so a
    study whose items are fully judged keeps them rather than the incomplete ones."""
    counts = Counter(size for size in sizes if size >= 2)
    if not counts:
        return None
    return max(counts, key=lambda size: (counts[size], size))


def fleiss_kappa_from_labels(
    labels_per_item: Sequence[Sequence], categories: Sequence | None = None, unequal_raters: str = "drop"
) -> FleissKappaFromLabels:
    """Fleiss' kappa for nominal labels given as one list of labels per item.

    Fleiss (1971) assumes the same number of raters for every item. With unequal counts:
    - "drop" (default): keep only items with the modal number of labels (see
      `_modal_rater_count`) and report the others in `items_left_out`: classic Fleiss,
      comparable with published values, at the price of fewer items.
    - "generalised": keep every item with at least two labels and use the varying-count
      generalisation in `evaluation.agreement.fleiss_kappa`.
    Items with fewer than two labels have no rater pair and are always left out. `categories`
    defaults to every label used, sorted; chance agreement only depends on categories used.
    """
    if unequal_raters not in UNEQUAL_RATER_POLICIES:
        raise ValueError(f"unknown unequal_raters policy {unequal_raters!r}: use 'drop' or 'generalised'")
    for item, labels in enumerate(labels_per_item):
        if any(is_missing(label) for label in labels):
            raise ValueError(f"item {item}: missing label; leave it out of the item's list")
    scale = (
        list(categories)
        if categories is not None
        else sorted_labels(itertools.chain.from_iterable(labels_per_item), "the labels (give `categories`)")
    )
    index_of = {label: position for position, label in enumerate(scale)}
    sizes = [len(labels) for labels in labels_per_item]
    modal = _modal_rater_count(sizes) if unequal_raters == "drop" else None
    kept = [item for item, size in enumerate(sizes) if size >= 2 and (modal is None or size == modal)]
    choices = []
    for item in kept:
        try:
            choices.append([index_of[label] for label in labels_per_item[item]])
        except KeyError as error:
            raise ValueError(f"item {item}: label {error.args[0]!r} is not among the categories") from error
    kappa = fleiss_kappa(counts_table(choices, len(scale))) if kept else math.nan
    left_out = tuple(sorted(set(range(len(sizes))) - set(kept)))
    return FleissKappaFromLabels(kappa, tuple(scale), len(kept), left_out, modal)


# --- aggregated labels per item --------------------------------------------------------------


def _numeric_labels_per_item(labels_per_item: Sequence[Sequence], what: str) -> list[np.ndarray]:
    arrays = []
    for item, labels in enumerate(labels_per_item):
        if not len(labels):
            raise ValueError(f"item {item} has no {what}")
        try:
            values = np.array(labels, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"item {item}: {what} must be numbers ({error})") from error
        if values.ndim != 1 or not np.isfinite(values).all():
            raise ValueError(f"item {item}: {what} must be a flat list of finite numbers (leave missing ones out)")
        arrays.append(values)
    return arrays


def mean_grades(grades_per_item: Sequence[Sequence[float]]) -> np.ndarray:
    """Mean grade of every item: the human score that model scores are correlated with."""
    return np.array([values.mean() for values in _numeric_labels_per_item(grades_per_item, "grades")])


def median_grades(grades_per_item: Sequence[Sequence[float]]) -> np.ndarray:
    """Median grade of every item (middle of the two middle grades for an even count): robust
    to one outlying annotator, and for ordinal scales it needs no equal spacing."""
    return np.array([np.median(values) for values in _numeric_labels_per_item(grades_per_item, "grades")])


def _binary_flags(values: np.ndarray, what: str) -> np.ndarray:
    if values.ndim != 1 or not np.isin(values, (0.0, 1.0)).all():
        raise ValueError(f"{what} must be binary (True/False or 1/0)")
    return values


# --- model scores against human grades -----------------------------------------------------------


@dataclass(frozen=True)
class RankCorrelation:
    statistic: float
    p_value: float
    items: int


def _paired_scores(first: Sequence[float], second: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Validated pair of equally long finite vectors; three items is the least for a p-value."""
    x = np.asarray(first, dtype=np.float64)
    y = np.asarray(second, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"scores and grades must be two flat lists of the same length, got {x.shape} and {y.shape}")
    if x.size < 3:
        raise ValueError(f"a rank correlation needs at least three items, got {x.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("scores and grades must be finite numbers; leave out items without a grade")
    return x, y


def _correlation(first, second, method) -> RankCorrelation:
    x, y = _paired_scores(first, second)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        # A constant side has no ranking to agree with; scipy would warn and return NaN.
        return RankCorrelation(math.nan, math.nan, x.size)
    result = method(x, y)
    return RankCorrelation(float(result.statistic), float(result.pvalue), x.size)


def spearman_correlation(model_scores: Sequence[float], human_grades: Sequence[float]) -> RankCorrelation:
    """Spearman's rho with its two-sided p-value (scipy.stats.spearmanr; ties get mean ranks)."""
    return _correlation(model_scores, human_grades, stats.spearmanr)


def kendall_tau_b(model_scores: Sequence[float], human_grades: Sequence[float]) -> RankCorrelation:
    """Kendall's tau-b with its two-sided p-value (scipy.stats.kendalltau): tau-b corrects for
    ties, which mean grades of a few annotators on a short scale always have."""
    return _correlation(model_scores, human_grades, lambda x, y: stats.kendalltau(x, y, variant="b"))


@dataclass(frozen=True)
class ModelHumanCorrelation:
    spearman: RankCorrelation
    kendall_tau_b: RankCorrelation


def correlate_with_mean_grades(
    model_scores: Sequence[float], grades_per_item: Sequence[Sequence[float]]
) -> ModelHumanCorrelation:
    """How well a model's scores order items like the annotators' mean grades do."""
    if len(model_scores) != len(grades_per_item):
        raise ValueError(f"{len(model_scores)} model scores for {len(grades_per_item)} graded items")
    human = mean_grades(grades_per_item)
    return ModelHumanCorrelation(spearman_correlation(model_scores, human), kendall_tau_b(model_scores, human))


# --- share of items with a positive majority --------------------------------------------------------


def wilson_interval(positives: int, items: int, level: float = CONFIDENCE_LEVEL) -> Interval:
    """Wilson score interval for a binomial share: unlike the normal interval it stays inside
    [0, 1] and keeps its coverage near 0 or 1, where quotability shares (85 %) sit."""
    if items < 1:
        raise ValueError("a confidence interval needs at least one item")
    if not 0 <= positives <= items:
        raise ValueError(f"positives must be between 0 and {items}, got {positives}")
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be between 0 and 1, got {level}")
    z = stats.norm.isf((1.0 - level) / 2.0)
    share = positives / items
    denominator = 1.0 + z**2 / items
    center = (share + z**2 / (2.0 * items)) / denominator
    half_width = z * math.sqrt(share * (1.0 - share) / items + z**2 / (4.0 * items**2)) / denominator
    return Interval(float(max(0.0, center - half_width)), float(min(1.0, center + half_width)))


@dataclass(frozen=True)
class ShareEstimate:
    share: float
    positives: int
    items: int
    interval: Interval | None
    method: str


def share_with_interval(
    flags: Sequence,
    method: str = "wilson",
    level: float = CONFIDENCE_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> ShareEstimate:
    """Share of items whose (majority) label is positive, with a confidence interval.

    This is the quote-recommendation crowd statistic: per item, the binary majority label for
    "the model's top non-gold paragraph is quotable"; the paper reports 85 %. "wilson" is the
    Wilson score interval; "bootstrap" the seeded percentile bootstrap over items shared with
    the proxy-study reports. A tied item (label None) is an error: resolve ties with
    `annotation.majority.majority_votes(tie_rule=...)` or leave the item out. No items gives NaN and no interval.
    """
    if method not in INTERVAL_METHODS:
        raise ValueError(f"unknown interval method {method!r}: use 'wilson' or 'bootstrap'")
    for item, flag in enumerate(flags):
        if is_missing(flag):
            raise ValueError(f"item {item} has no majority label (a tie?); resolve ties or leave the item out")
    try:
        values = np.array(list(flags), dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"labels must be binary (True/False or 1/0): {error}") from error
    _binary_flags(values, "labels")
    if not values.size:
        return ShareEstimate(math.nan, 0, 0, None, method)
    positives = int(values.sum())
    if method == "wilson":
        interval = wilson_interval(positives, values.size, level)
    else:
        interval = bootstrap_share_interval(values, resamples, seed, level)
    return ShareEstimate(positives / values.size, positives, values.size, interval, method)
