"""Statistics for relevance and quotability studies, checked against their reference packages
(krippendorff, scikit-learn, statsmodels, scipy) on the same data and against published or
hand-worked examples."""

import itertools
import math
import warnings

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from annotation.majority import MajorityVote, majority_votes
from evaluation import agreement
from evaluation.label_agreement import (
    MEASUREMENT_LEVELS,
    cohen_kappa,
    coincidence_matrix,
    correlate_with_mean_grades,
    fleiss_kappa_from_labels,
    kendall_tau_b,
    krippendorff_alpha,
    mean_grades,
    mean_pairwise_cohen_kappa,
    median_grades,
    reliability_matrix,
    share_with_interval,
    spearman_correlation,
    wilson_interval,
)

nan = math.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers
# (rows) and twelve units, values 1..5, NaN = not coded. The krippendorff package documents the
# same matrix with alpha 0.743 (nominal), 0.815 (ordinal) and 0.797 (ratio); 0.849 (interval)
# is the paper's own value.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
]

# The krippendorff package's documented example (three coders, fifteen units; Wikipedia's
# computational example): nominal 0.691358, interval 0.810845.
PACKAGE_EXAMPLE = [
    [nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
    [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
    [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4],
]


def package_alpha(data, level):
    """The krippendorff package's alpha, NaN where it declines (no pairable unit, one value)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
    except ValueError:
        return nan


def random_reliability_matrices(count, seed=20240612):
    """Seeded raters x units matrices of many shapes: few or many values, discrete or continuous,
    from no missing ratings to mostly missing."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        raters, units = rng.integers(2, 9), rng.integers(1, 41)
        if rng.random() < 0.7:
            values = rng.integers(0, rng.integers(2, 8), size=(raters, units)).astype(np.float64)
        else:
            values = rng.uniform(0.0, 10.0, size=(raters, units)).round(rng.integers(0, 3))
        values[rng.random((raters, units)) < rng.uniform(0.0, 0.7)] = nan
        yield values


def same_or_both_nan(actual, expected, tolerance):
    if math.isnan(expected):
        return math.isnan(actual)
    return abs(actual - expected) <= tolerance


# --- Krippendorff's alpha ---------------------------------------------------------------------------


def test_alpha_equals_the_krippendorff_package_at_every_level_on_random_matrices_with_missing_ratings():
    compared = 0
    for matrix in random_reliability_matrices(400):
        for level in MEASUREMENT_LEVELS:
            expected = package_alpha(matrix, level)
            assert same_or_both_nan(krippendorff_alpha(matrix, level), expected, 1e-9), (level, matrix.tolist())
            compared += not math.isnan(expected)
    assert compared > 1200


@settings(max_examples=150, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(2, 6), st.integers(1, 12)),
        elements=st.one_of(st.just(nan), st.integers(0, 5).map(float)),
    ),
    st.sampled_from(MEASUREMENT_LEVELS),
)
def test_alpha_equals_the_krippendorff_package_for_any_small_matrix(matrix, level):
    assert same_or_both_nan(krippendorff_alpha(matrix, level), package_alpha(matrix, level), 1e-9)


def test_krippendorff_2011_coincidence_matrix():
    """Unit 6 (values 1, 2, 3, 4) adds 1/3 to each off-diagonal cell among 1..4; unit 12 has a
    single value and adds nothing, leaving 40 pairable values."""
    coincidences = coincidence_matrix(KRIPPENDORFF_2011)
    assert coincidences.values.tolist() == [1, 2, 3, 4, 5]
    thirds = [[21, 4, 1, 1, 0], [4, 30, 4, 1, 0], [1, 4, 24, 1, 0], [1, 1, 1, 12, 0], [0, 0, 0, 0, 9]]
    np.testing.assert_allclose(coincidences.matrix * 3, thirds, atol=1e-12)
    assert coincidences.margins.tolist() == pytest.approx([9, 13, 10, 5, 3])


def test_krippendorff_2011_alpha_at_each_level_of_measurement():
    """Nominal by hand from the coincidences: n = 40, 8 disagreeing pairs off the diagonal,
    sum n_c^2 = 81 + 169 + 100 + 25 + 9 = 384, so alpha = 1 - 39 * 8 / (40^2 - 384)."""
    assert krippendorff_alpha(KRIPPENDORFF_2011, "nominal") == pytest.approx(1 - 312 / 1216, abs=1e-12)
    published = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
    for level, value in published.items():
        assert round(krippendorff_alpha(KRIPPENDORFF_2011, level), 3) == value


def test_krippendorff_2011_binary_example_for_two_observers():
    """Section A: ten units, two observers; n_0 = 14, n_1 = 6 and 4 disagreeing units, so
    alpha = 1 - (20 - 1) * 4 / (14 * 6) = 0.095."""
    observers = [[0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]]
    assert krippendorff_alpha(observers, "nominal") == pytest.approx(1 - 76 / 84, abs=1e-12)
    assert round(krippendorff_alpha(observers, "nominal"), 3) == 0.095


def test_krippendorff_package_documented_example():
    assert round(krippendorff_alpha(PACKAGE_EXAMPLE, "nominal"), 6) == 0.691358
    assert round(krippendorff_alpha(PACKAGE_EXAMPLE, "interval"), 6) == 0.810845


def test_alpha_hand_worked_with_three_raters_on_one_unit_and_an_unpairable_unit():
    """Units (1, 1, 2), (2, 2, -) and (1, -, -). Unit 1 (3 ratings, weight 1/2): o_11 = 2*1/2,
    o_12 = o_21 = 2*1/2. Unit 2: o_22 = 2. Unit 3 is unpairable. n_1 = 2, n_2 = 3, n = 5:
    D_o = 2/5, D_e = 2*2*3 / (5*4) = 3/5, nominal alpha = 1/3."""
    matrix = [[1, 2, 1], [1, 2, nan], [2, nan, nan]]
    assert coincidence_matrix(matrix).matrix.tolist() == [[1.0, 1.0], [1.0, 2.0]]
    assert krippendorff_alpha(matrix, "nominal") == pytest.approx(1 / 3, abs=1e-12)
    # Two values only: the interval distance (1 - 2)^2 is the nominal one.
    assert krippendorff_alpha(matrix, "interval") == pytest.approx(1 / 3, abs=1e-12)


def test_nominal_alpha_is_fleiss_kappa_corrected_for_sample_size_when_no_rating_is_missing():
    """With m ratings for each of N units (n = N m values), alpha = 1 - (1 - kappa)(n - 1)/n."""
    rng = np.random.default_rng(7)
    for _ in range(100):
        raters, units, categories = rng.integers(2, 7), rng.integers(2, 30), rng.integers(2, 5)
        matrix = rng.integers(0, categories, size=(raters, units))
        kappa = agreement.fleiss_kappa(agreement.counts_table(matrix.T, categories))
        if math.isnan(kappa):
            continue
        pairable = raters * units
        expected = 1 - (1 - kappa) * (pairable - 1) / pairable
        assert krippendorff_alpha(matrix, "nominal") == pytest.approx(expected, abs=1e-12)


def test_alpha_is_nan_without_a_unit_rated_twice_or_without_any_variation():
    assert math.isnan(krippendorff_alpha([[1, nan], [nan, 2]], "nominal"))
    assert math.isnan(krippendorff_alpha([[4, 4, nan], [4, 4, 2]], "interval"))
    assert krippendorff_alpha([[4, 4, 1], [4, 4, 1]], "interval") == 1.0


@pytest.mark.parametrize(
    ("data", "level", "message"),
    [
        ([1, 2, 3], "nominal", "raters x units matrix"),
        ([["low", "high"], ["low", "low"]], "nominal", "must be numeric"),
        ([[1, np.inf], [1, 2]], "interval", "infinite"),
        ([[1, 2], [1, 2]], "cardinal", "unknown level of measurement"),
        ([[-1, 2], [1, 2]], "ratio", "non-negative"),
    ],
)
def test_alpha_rejects_malformed_input(data, level, message):
    with pytest.raises(ValueError, match=message):
        krippendorff_alpha(data, level)


def test_reliability_matrix_lays_out_judgments_by_rater_and_unit():
    layout = reliability_matrix([("ann", "q1", 2), ("bob", "q1", 3), ("ann", "q2", 0), ("cat", "q3", 1)])
    assert layout.raters == ("ann", "bob", "cat")
    assert layout.units == ("q1", "q2", "q3")
    np.testing.assert_array_equal(layout.values, [[2, 0, nan], [3, nan, nan], [nan, nan, 1]])


@pytest.mark.parametrize(
    ("ratings", "message"),
    [
        ([("ann", "q1", 2), ("ann", "q1", 3)], "rating 1: rater 'ann' rated unit 'q1' more than once"),
        ([("ann", "q1", "relevant")], "rating 0: value 'relevant' is not a number"),
        ([("ann", "q1", None)], "rating 0: .* has no value"),
        ([("ann", "q1", math.inf)], "not finite"),
    ],
)
def test_reliability_matrix_rejects_duplicate_or_non_numeric_ratings(ratings, message):
    with pytest.raises(ValueError, match=message):
        reliability_matrix(ratings)


# --- Cohen's kappa --------------------------------------------------------------------------------------


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_equals_scikit_learn_on_random_rater_pairs(weights):
    rng = np.random.default_rng(11)
    compared = 0
    for _ in range(300):
        categories, items = rng.integers(2, 7), rng.integers(1, 60)
        first = rng.integers(0, categories, size=items)
        # Correlated second rater, so kappas spread over the whole range.
        second = np.where(rng.random(items) < rng.random(), first, rng.integers(0, categories, size=items))
        scale = list(range(categories + 1)) if rng.random() < 0.5 else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = cohen_kappa_score(first, second, weights=weights, labels=scale)
        assert same_or_both_nan(cohen_kappa(first, second, weights, scale), expected, 1e-12)
        compared += not math.isnan(expected)
    assert compared > 250


def test_unweighted_cohen_kappa_takes_any_labels():
    rng = np.random.default_rng(3)
    first = rng.choice(["yes", "no", "unsure"], size=40)
    second = rng.choice(["yes", "no", "unsure"], size=40)
    assert cohen_kappa(first, second) == pytest.approx(cohen_kappa_score(first, second), abs=1e-12)


def test_cohen_kappa_textbook_two_by_two_example():
    """50 items: both yes 20, first yes / second no 5, first no / second yes 10, both no 15.
    p_o = 35/50 = 0.7; p_e = 25/50 * 30/50 + 25/50 * 20/50 = 0.5; kappa = 0.2 / 0.5 = 0.4."""
    first = ["yes"] * 25 + ["no"] * 25
    second = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(first, second) == pytest.approx(0.4, abs=1e-12)


def test_weighted_cohen_kappa_hand_worked_on_a_three_point_scale():
    """Grades (0, 0), (1, 2), (2, 2). Margins: first 1, 1, 1; second 1, 0, 2. Observed weighted
    disagreement 1 in every scheme (one pair, one step apart). Expected, summing r_i c_j w_ij / 3:
    unweighted (2 + 3 + 1) / 3 = 2, linear (4 + 3 + 2) / 3 = 3, quadratic (8 + 3 + 4) / 3 = 5."""
    first, second = [0, 1, 2], [0, 2, 2]
    assert cohen_kappa(first, second) == pytest.approx(1 - 1 / 2)
    assert cohen_kappa(first, second, "linear") == pytest.approx(1 - 1 / 3)
    assert cohen_kappa(first, second, "quadratic") == pytest.approx(1 - 1 / 5)


def test_cohen_kappa_is_nan_when_both_raters_always_give_the_same_label():
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))


@pytest.mark.parametrize(
    ("first", "second", "options", "message"),
    [
        ([1, 2], [1], {}, "different numbers of items"),
        ([], [], {}, "at least one item"),
        ([1, None], [1, 2], {}, "first rater, item 1: missing label"),
        ([1, 2], [1, nan], {}, "second rater, item 1: missing label"),
        ([1, 3], [1, 2], {"labels": [1, 2]}, "label 3, which is not in `labels`"),
        ([1, "a"], [1, 1], {}, "cannot be ordered"),
        ([1, 2], [1, 2], {"weights": "cubic"}, "unknown kappa weights"),
    ],
)
def test_cohen_kappa_rejects_malformed_input(first, second, options, message):
    with pytest.raises(ValueError, match=message):
        cohen_kappa(first, second, **options)


def test_mean_pairwise_cohen_kappa_equals_scikit_learn_per_pair_on_the_items_both_rated():
    rng = np.random.default_rng(5)
    for matrix in random_reliability_matrices(100, seed=5):
        matrix = np.floor(matrix)
        scale = np.unique(matrix[~np.isnan(matrix)]).tolist()
        weights = [None, "linear", "quadratic"][rng.integers(3)]
        result = mean_pairwise_cohen_kappa(matrix, weights)
        expected_pairs = {}
        for first, second in itertools.combinations(range(len(matrix)), 2):
            shared = ~np.isnan(matrix[first]) & ~np.isnan(matrix[second])
            if shared.any():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    expected_pairs[first, second] = cohen_kappa_score(
                        matrix[first, shared], matrix[second, shared], weights=weights, labels=scale
                    )
        assert [(pair.first, pair.second) for pair in result.pairs] == list(expected_pairs)
        for pair in result.pairs:
            assert same_or_both_nan(pair.kappa, expected_pairs[pair.first, pair.second], 1e-12)
        defined = [kappa for kappa in expected_pairs.values() if not math.isnan(kappa)]
        assert same_or_both_nan(result.mean, float(np.mean(defined)) if defined else nan, 1e-12)
        assert result.pairs_averaged == len(defined)


def test_mean_pairwise_cohen_kappa_skips_pairs_without_shared_items_and_undefined_pairs():
    """Raters 0 and 1 share units 0-3 (kappa 0.5: p_o 3/4, p_e 1/2); rater 2 shares only unit 4
    with rater 0, where both gave 1: one item, one label, kappa undefined."""
    matrix = [
        [0, 1, 0, 1, 1],
        [0, 1, 0, 0, nan],
        [nan, nan, nan, nan, 1],
    ]
    result = mean_pairwise_cohen_kappa(matrix)
    assert [(pair.first, pair.second, pair.items) for pair in result.pairs] == [(0, 1, 4), (0, 2, 1)]
    assert result.pairs[0].kappa == pytest.approx(0.5)
    assert math.isnan(result.pairs[1].kappa)
    assert result.mean == pytest.approx(0.5)
    assert result.pairs_averaged == 1


def test_mean_pairwise_cohen_kappa_needs_two_raters():
    with pytest.raises(ValueError, match="at least two raters"):
        mean_pairwise_cohen_kappa([[1, 2, 3]])


# --- Fleiss' kappa from labels per item ---------------------------------------------------------------


def test_fleiss_kappa_from_labels_equals_statsmodels_when_every_item_has_the_same_raters():
    rng = np.random.default_rng(13)
    compared = 0
    for _ in range(200):
        items, raters, categories = rng.integers(1, 40), rng.integers(2, 9), rng.integers(2, 6)
        labels = rng.integers(0, categories, size=(items, raters))
        table, _ = aggregate_raters(labels)
        expected = statsmodels_fleiss_kappa(table, method="fleiss")
        result = fleiss_kappa_from_labels(labels.tolist())
        assert (result.items_used, result.items_left_out, result.raters_per_item) == (items, (), raters)
        if np.isfinite(expected):
            assert result.kappa == pytest.approx(expected, abs=1e-12)
            compared += 1
    assert compared > 150


def test_fleiss_kappa_drops_items_without_the_modal_number_of_raters_by_default():
    labels = [
        ["yes", "yes", "no"],
        ["no", "no", "no"],
        ["yes", "no"],
        ["yes"],
        ["yes", "yes", "yes"],
        ["no", "yes", "no", "yes"],
    ]
    result = fleiss_kappa_from_labels(labels)
    assert result.categories == ("no", "yes")
    assert result.raters_per_item == 3
    assert result.items_left_out == (2, 3, 5)
    assert result.items_used == 3
    kept_table, _ = aggregate_raters([[1, 1, 0], [0, 0, 0], [1, 1, 1]])
    assert result.kappa == pytest.approx(statsmodels_fleiss_kappa(kept_table, method="fleiss"), abs=1e-12)


def test_fleiss_kappa_modal_rater_count_prefers_the_larger_count_on_a_tie():
    result = fleiss_kappa_from_labels([[0, 0], [0, 1], [1, 1, 1], [0, 1, 1]])
    assert result.raters_per_item == 3
    assert result.items_left_out == (0, 1)


def test_fleiss_kappa_generalised_keeps_every_item_with_two_labels():
    labels = [[0, 0, 1], [1, 1], [2], [0, 2, 2, 2]]
    result = fleiss_kappa_from_labels(labels, categories=[0, 1, 2], unequal_raters="generalised")
    assert result.items_left_out == (2,)
    assert result.raters_per_item is None
    counts = agreement.counts_table([labels[0], labels[1], labels[3]], 3)
    assert result.kappa == pytest.approx(agreement.fleiss_kappa(counts), abs=1e-12)


def test_fleiss_kappa_from_labels_is_nan_without_items_to_compare():
    result = fleiss_kappa_from_labels([["a"], ["b"]])
    assert math.isnan(result.kappa)
    assert result.items_left_out == (0, 1)


@pytest.mark.parametrize(
    ("labels", "options", "message"),
    [
        ([[0, 1], [0, None]], {}, "item 1: missing label"),
        ([[0, 1], [0, 3]], {"categories": [0, 1]}, "item 1: label 3 is not among the categories"),
        ([[0, 1]], {"unequal_raters": "pad"}, "unknown unequal_raters policy"),
    ],
)
def test_fleiss_kappa_from_labels_rejects_malformed_input(labels, options, message):
    with pytest.raises(ValueError, match=message):
        fleiss_kappa_from_labels(labels, **options)


# --- aggregated labels per item -------------------------------------------------------------------------


def test_majority_vote_reports_ties_instead_of_breaking_them():
    votes = majority_votes([[True, True, False], ["b", "a", "b", "a"], [2, 1, 3], [5]])
    assert votes == [
        MajorityVote(label=True, votes=2, raters=3, tied_labels=()),
        MajorityVote(label=None, votes=2, raters=4, tied_labels=("a", "b")),
        MajorityVote(label=None, votes=1, raters=3, tied_labels=(1, 2, 3)),
        MajorityVote(label=5, votes=1, raters=1, tied_labels=()),
    ]
    assert [vote.is_tie for vote in votes] == [False, True, True, False]


def test_majority_vote_tie_rules_take_the_lowest_or_highest_tied_label():
    labels = [[True, False], [1, 3, 3, 1, 2], [0, 0, 1]]
    lowest = majority_votes(labels, tie_rule="lowest")
    highest = majority_votes(labels, tie_rule="highest")
    assert [vote.label for vote in lowest] == [False, 1, 0]
    assert [vote.label for vote in highest] == [True, 3, 0]
    assert [vote.tied_labels for vote in lowest] == [(False, True), (1, 3), ()]


@pytest.mark.parametrize(
    ("labels", "options", "message"),
    [
        ([[1], []], {}, "item 1 has no labels"),
        ([[1, None]], {}, "item 0: missing label"),
        ([[1, 2]], {"tie_rule": "random"}, "unknown tie rule"),
        ([[1, "a"]], {}, "cannot be ordered"),
    ],
)
def test_majority_vote_rejects_malformed_input(labels, options, message):
    with pytest.raises(ValueError, match=message):
        majority_votes(labels, **options)


def test_mean_and_median_grades_per_item():
    grades = [[0, 1, 3], [2, 2], [1, 2, 3, 10]]
    assert mean_grades(grades).tolist() == pytest.approx([4 / 3, 2.0, 4.0])
    assert median_grades(grades).tolist() == [1.0, 2.0, 2.5]


@pytest.mark.parametrize(
    ("function", "labels", "message"),
    [
        (mean_grades, [[1, 2], []], "item 1 has no grades"),
        (median_grades, [[1, nan]], "item 0: grades must be a flat list of finite numbers"),
        (mean_grades, [["high"]], "item 0: grades must be numbers"),
    ],
)
def test_aggregates_reject_empty_missing_or_wrong_labels(function, labels, message):
    with pytest.raises(ValueError, match=message):
        function(labels)


# --- model scores against mean human grades --------------------------------------------------------------


def brute_force_tau_b(x, y):
    """Tau-b from its definition: (concordant - discordant) / sqrt((n0 - n1)(n0 - n2)) with
    n0 all pairs and n1, n2 the pairs tied in x and in y."""
    concordant = discordant = tied_x = tied_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        sign = np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
        concordant += sign > 0
        discordant += sign < 0
        tied_x += x[i] == x[j]
        tied_y += y[i] == y[j]
    pairs = len(x) * (len(x) - 1) / 2
    return (concordant - discordant) / math.sqrt((pairs - tied_x) * (pairs - tied_y))


def test_rank_correlations_equal_scipy_and_their_definitions_on_tied_data():
    rng = np.random.default_rng(17)
    for _ in range(100):
        items = rng.integers(3, 60)
        grades = mean_grades(rng.integers(0, 4, size=(items, 3)).tolist())
        scores = grades + rng.normal(0, rng.uniform(0.1, 3.0), size=items).round(1)
        if np.ptp(scores) == 0 or np.ptp(grades) == 0:
            continue
        spearman = spearman_correlation(scores, grades)
        reference = stats.spearmanr(scores, grades)
        assert (spearman.statistic, spearman.p_value, spearman.items) == pytest.approx(
            (reference.statistic, reference.pvalue, items), abs=1e-12
        )
        assert spearman.statistic == pytest.approx(
            np.corrcoef(stats.rankdata(scores), stats.rankdata(grades))[0, 1], abs=1e-12
        )
        kendall = kendall_tau_b(scores, grades)
        reference = stats.kendalltau(scores, grades, variant="b")
        assert (kendall.statistic, kendall.p_value) == pytest.approx((reference.statistic, reference.pvalue), abs=1e-12)
        assert kendall.statistic == pytest.approx(brute_force_tau_b(scores, grades), abs=1e-12)


def test_rank_correlations_hand_worked():
    """Scores 1, 2, 3, 4 against grades 1, 3, 2, 4: one swapped pair. Spearman
    1 - 6 * (1 + 1) / (4 * 15) = 0.8; Kendall (5 concordant - 1 discordant) / 6 = 2/3."""
    assert spearman_correlation([1, 2, 3, 4], [1, 3, 2, 4]).statistic == pytest.approx(0.8)
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]).statistic == pytest.approx(2 / 3)


def test_correlation_with_mean_grades_averages_each_items_grades_first():
    scores = [0.1, 0.4, 0.35, 0.8, 0.9]
    grades = [[0, 1], [1, 1, 2], [2, 2], [1, 3], [3, 3, 2]]
    result = correlate_with_mean_grades(scores, grades)
    means = [0.5, 4 / 3, 2.0, 2.0, 8 / 3]
    assert result.spearman.statistic == pytest.approx(stats.spearmanr(scores, means).statistic)
    assert result.kendall_tau_b.statistic == pytest.approx(stats.kendalltau(scores, means).statistic)
    with pytest.raises(ValueError, match="4 model scores for 5 graded items"):
        correlate_with_mean_grades(scores[:4], grades)


def test_rank_correlation_with_a_constant_side_is_nan():
    result = kendall_tau_b([1, 2, 3], [2, 2, 2])
    assert math.isnan(result.statistic) and math.isnan(result.p_value)
    assert result.items == 3


@pytest.mark.parametrize(
    ("scores", "grades", "message"),
    [
        ([1, 2, 3], [1, 2], "same length"),
        ([1, 2], [1, 2], "at least three items"),
        ([1, 2, nan], [1, 2, 3], "finite numbers"),
    ],
)
def test_rank_correlation_rejects_malformed_input(scores, grades, message):
    with pytest.raises(ValueError, match=message):
        spearman_correlation(scores, grades)


# --- share of items judged quotable, with a confidence interval ---------------------------------------------


def test_wilson_interval_equals_statsmodels():
    for items in (1, 2, 7, 40, 100, 1000):
        for positives in sorted({0, 1, items // 3, items // 2, items - 1, items}):
            for level in (0.9, 0.95, 0.99):
                low, high = proportion_confint(positives, items, alpha=1 - level, method="wilson")
                interval = wilson_interval(positives, items, level)
                assert (interval.low, interval.high) == pytest.approx((low, high), abs=1e-12)


def test_quotable_share_with_wilson_interval_like_the_quote_recommendation_crowd_study():
    """850 of 1,000 top non-gold paragraphs judged quotable: 85 % (the paper's figure). By hand,
    z = 1.96: centre (0.85 + z^2/2000) / (1 + z^2/1000) = 0.84866, half-width
    z sqrt(0.85 * 0.15 / 1000 + z^2 / 4e6) / (1 + z^2/1000) = 0.02213, so 82.7 % to 87.1 %."""
    flags = [True] * 850 + [False] * 150
    estimate = share_with_interval(flags)
    assert (estimate.share, estimate.positives, estimate.items, estimate.method) == (0.85, 850, 1000, "wilson")
    low, high = proportion_confint(850, 1000, alpha=0.05, method="wilson")
    assert (estimate.interval.low, estimate.interval.high) == pytest.approx((low, high), abs=1e-12)
    assert round(estimate.interval.low, 3) == 0.827 and round(estimate.interval.high, 3) == 0.871


def test_quotable_share_with_a_seeded_percentile_bootstrap_interval():
    rng = np.random.default_rng(19)
    flags = rng.random(60) < 0.8
    estimate = share_with_interval(flags.tolist(), method="bootstrap", resamples=500, seed=3)
    # Items are of two types (quotable or not); a resample draws 60 of them: Multinomial(60, shares).
    first_type = flags[0]
    shares = np.array([np.mean(flags == first_type), np.mean(flags != first_type)])
    drawn = np.random.default_rng(3).multinomial(60, shares, size=500)
    positives = drawn[:, 0] if first_type else drawn[:, 1]
    expected_low, expected_high = np.percentile(positives / 60, [2.5, 97.5])
    assert (estimate.interval.low, estimate.interval.high) == pytest.approx((expected_low, expected_high), abs=1e-12)
    assert estimate.interval.low <= estimate.share <= estimate.interval.high
    assert share_with_interval(flags.tolist(), method="bootstrap", resamples=500, seed=3) == estimate


def test_quotable_share_of_no_items_is_undefined():
    estimate = share_with_interval([])
    assert math.isnan(estimate.share) and estimate.interval is None and estimate.items == 0


@pytest.mark.parametrize(
    ("flags", "options", "message"),
    [
        ([True, None, False], {}, "item 1 has no majority label"),
        ([1, 0, 2], {}, "must be binary"),
        (["yes"], {}, "must be binary"),
        ([True], {"method": "normal"}, "unknown interval method"),
    ],
)
def test_quotable_share_rejects_ties_and_non_binary_labels(flags, options, message):
    with pytest.raises(ValueError, match=message):
        share_with_interval(flags, **options)


@pytest.mark.parametrize(
    ("positives", "items", "level", "message"),
    [(1, 0, 0.95, "at least one item"), (5, 4, 0.95, "between 0 and 4"), (1, 4, 1.5, "between 0 and 1")],
)
def test_wilson_interval_rejects_impossible_counts(positives, items, level, message):
    with pytest.raises(ValueError, match=message):
        wilson_interval(positives, items, level)
