"""Agreement statistics match their reference implementations and the published examples."""

import itertools
import math

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

# Published tables as statsmodels' own test suite carries them: Wikipedia's Fleiss' kappa
# example (10 subjects, 5 categories, 14 raters) and Fleiss (1971)'s psychiatric diagnoses
# (30 subjects, 6 raters, 5 categories; R irr's `diagnoses` data set).
from statsmodels.stats.tests.test_inter_rater import diagnoses as fleiss_1971_ratings
from statsmodels.stats.tests.test_inter_rater import table1 as wikipedia_table

from evaluation import agreement


def random_tables(count, seed=20240611):
    """Seeded counts tables of many shapes with an equal number of raters per item."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        items, categories, raters = rng.integers(1, 40), rng.integers(2, 8), rng.integers(2, 15)
        choices = rng.integers(0, categories, size=(items, raters))
        yield agreement.counts_table(choices, categories)


def test_fleiss_and_randolph_kappa_equal_statsmodels_on_random_tables():
    compared = 0
    for table in random_tables(400):
        expected = statsmodels_fleiss_kappa(table, method="fleiss")
        if np.isfinite(expected):
            assert agreement.fleiss_kappa(table) == pytest.approx(expected, abs=1e-12)
            compared += 1
        assert agreement.randolph_kappa(table) == pytest.approx(
            statsmodels_fleiss_kappa(table, method="randolph"), abs=1e-12
        )
    assert compared > 350


def test_wikipedia_example_gives_fleiss_kappa_0_210():
    assert wikipedia_table.sum(axis=1).tolist() == [14] * 10
    assert agreement.fleiss_kappa(wikipedia_table) == pytest.approx(0.210, abs=5e-4)


def test_fleiss_1971_diagnoses_give_kappa_0_430():
    table, _categories = aggregate_raters(fleiss_1971_ratings)
    assert table.shape == (30, 5)
    assert table.sum(axis=0).tolist() == [26, 26, 30, 55, 43]
    assert agreement.fleiss_kappa(table) == pytest.approx(0.4302445, abs=1e-7)


def test_counts_table_from_choices_rejects_unknown_category():
    assert agreement.counts_table([[0, 0, 2], [1, 2, 0]], 3).tolist() == [[2, 0, 1], [1, 1, 1]]
    with pytest.raises(ValueError, match="item 1: choice 3"):
        agreement.counts_table([[0, 1, 2], [3, 0, 0]], 3)


def pairwise_fleiss_kappa(choices_per_item, categories):
    """Fleiss' kappa for varying rater counts, straight from its definition: observed agreement
    = mean over items (with two or more ratings) of the share of agreeing ordered rater pairs;
    chance = sum of squared pooled category shares over those items' ratings."""
    rated = [choices for choices in choices_per_item if len(choices) >= 2]
    observed = np.mean([np.mean([a == b for a, b in itertools.permutations(choices, 2)]) for choices in rated])
    pooled = [choice for choices in rated for choice in choices]
    expected = sum((pooled.count(category) / len(pooled)) ** 2 for category in range(categories))
    return (observed - expected) / (1 - expected)


def test_fleiss_kappa_with_varying_rater_counts_uses_each_items_own_pairs():
    rng = np.random.default_rng(7)
    for _ in range(50):
        categories = int(rng.integers(2, 6))
        choices = [[0, 1]] + [
            list(rng.integers(0, categories, size=rng.integers(1, 7))) for _ in range(rng.integers(3, 20))
        ]
        table = agreement.counts_table(choices, categories)
        assert agreement.fleiss_kappa(table) == pytest.approx(pairwise_fleiss_kappa(choices, categories), abs=1e-12)


def test_kappa_is_undefined_when_every_rating_falls_in_one_category():
    assert math.isnan(agreement.fleiss_kappa([[3, 0, 0], [3, 0, 0]]))
    assert agreement.randolph_kappa([[3, 0, 0], [3, 0, 0]]) == 1.0


def test_all_agree_none_agree_and_majority_per_item():
    table = agreement.counts_table([[0, 0, 0], [0, 1, 2], [1, 1, 2], [2, 2, 1]], 3)
    assert agreement.all_agree_flags(table).tolist() == [True, False, False, False]
    assert agreement.none_agree_flags(table).tolist() == [False, True, False, False]
    assert agreement.majority_correct_flags(table, [0, 0, 1, 1]).tolist() == [True, False, True, False]


@pytest.mark.parametrize("raters, threshold", [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4)])
def test_majority_means_strictly_more_than_half(raters, threshold):
    assert agreement.majority_threshold(raters) == threshold == math.ceil((raters + 1) / 2)


def test_random_baseline_for_three_options_and_three_raters():
    baseline = agreement.random_baseline(options=3, raters=3)
    assert baseline.fleiss_kappa == 0 and baseline.randolph_kappa == 0
    assert baseline.all_agree == pytest.approx(1 / 9)
    assert baseline.none_agree == pytest.approx(2 / 9)
    assert baseline.majority_accuracy == pytest.approx(7 / 27)  # 3 * (1/3)^2 * (2/3) + (1/3)^3
    assert baseline.accuracy == pytest.approx(1 / 3)


@pytest.mark.parametrize("options, raters", [(2, 3), (3, 3), (3, 5), (4, 2), (5, 3), (2, 4), (4, 6)])
def test_random_baseline_formulas_equal_full_enumeration(options, raters):
    outcomes = list(itertools.product(range(options), repeat=raters))
    table = agreement.counts_table(outcomes, options)
    gold = [0] * len(outcomes)
    baseline = agreement.random_baseline(options, raters)
    assert baseline.all_agree == pytest.approx(agreement.all_agree_flags(table).mean(), abs=1e-12)
    assert baseline.none_agree == pytest.approx(agreement.none_agree_flags(table).mean(), abs=1e-12)
    assert baseline.majority_accuracy == pytest.approx(agreement.majority_correct_flags(table, gold).mean(), abs=1e-12)
    if raters > options:
        assert baseline.none_agree == 0


@pytest.mark.parametrize("options, raters", [(3, 3), (4, 5), (2, 3), (20, 3)])
def test_random_baseline_matches_a_seeded_simulation(options, raters):
    rng = np.random.default_rng(options * 100 + raters)
    items = 100_000
    table = agreement.counts_table(rng.integers(0, options, size=(items, raters)), options)
    gold = rng.integers(0, options, size=items)
    baseline = agreement.random_baseline(options, raters)
    assert agreement.share(agreement.all_agree_flags(table)) == pytest.approx(baseline.all_agree, abs=0.01)
    assert agreement.share(agreement.none_agree_flags(table)) == pytest.approx(baseline.none_agree, abs=0.01)
    assert agreement.share(agreement.majority_correct_flags(table, gold)) == pytest.approx(
        baseline.majority_accuracy, abs=0.01
    )
    assert agreement.fleiss_kappa(table) == pytest.approx(baseline.fleiss_kappa, abs=0.01)
    assert agreement.randolph_kappa(table) == pytest.approx(baseline.randolph_kappa, abs=0.01)


def test_exact_mcnemar_equals_statsmodels():
    rng = np.random.default_rng(3)
    cases = [(np.ones(5, bool), np.ones(5, bool))]
    cases += [
        (rng.random(n) < p, rng.random(n) < q)
        for n, p, q in [(10, 0.5, 0.5), (60, 0.7, 0.4), (200, 0.68, 0.93), (31, 0.2, 0.9)]
    ]
    for first, second in cases:
        result = agreement.mcnemar_exact(first, second)
        table = [[np.sum(first & second), np.sum(first & ~second)], [np.sum(~first & second), np.sum(~first & ~second)]]
        assert (result.first_only, result.second_only) == (table[0][1], table[1][0])
        assert result.p_value == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-9)


def test_mcnemar_without_discordant_pairs_is_one():
    assert agreement.mcnemar_exact([True, False], [True, False]).p_value == 1.0


def test_bootstrap_weights_draw_n_items_per_resample_spread_over_the_types():
    weights = agreement.bootstrap_weights(np.array([30, 15, 5]), resamples=4000, seed=1)
    assert weights.shape == (4000, 3)
    assert (weights.sum(axis=1) == 50).all()
    # Drawing 50 items with replacement puts Binomial(50, share) of them in each type.
    shares = np.array([30, 15, 5]) / 50
    assert np.allclose(weights.mean(axis=0), 50 * shares, rtol=0.02)
    assert np.allclose(weights.var(axis=0), 50 * shares * (1 - shares), rtol=0.1)


def test_items_with_the_same_values_are_one_type():
    table = np.array([[3, 0, 0], [2, 1, 0], [3, 0, 0], [0, 0, 3]])
    types = agreement.item_types(table, np.array([True, False, True, False]))
    assert types.representatives.tolist() == [0, 1, 3]
    assert types.multiplicities.tolist() == [2, 1, 1]


def test_item_types_are_the_groups_of_numpy_unique_in_first_occurrence_order():
    rng = np.random.default_rng(9)
    table = agreement.counts_table(rng.integers(0, 4, size=(5000, 3)), 4)
    flags = rng.random(5000) < 0.3
    types = agreement.item_types(table, flags)
    rows = np.hstack([table, flags[:, None]])
    _, first, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first)
    assert types.representatives.tolist() == first[order].tolist()
    assert types.multiplicities.tolist() == counts[order].tolist()


def test_bootstrap_interval_is_seeded_and_contains_the_point_estimate():
    choices = np.random.default_rng(5).integers(0, 4, size=(120, 3))
    table = agreement.counts_table(choices, 4)
    kappa = agreement.fleiss_kappa(table)
    types = agreement.item_types(table)

    def statistic(weights):
        return agreement.weighted_kappa(table[types.representatives], weights, "fleiss")

    first = agreement.bootstrap_interval(statistic, types.multiplicities, seed=11)
    again = agreement.bootstrap_interval(statistic, types.multiplicities, seed=11)
    other = agreement.bootstrap_interval(statistic, types.multiplicities, seed=12)
    assert first == again
    assert first != other
    assert first.low < kappa < first.high


def test_resampling_types_gives_the_interval_of_resampling_items_one_by_one():
    choices = np.random.default_rng(7).integers(0, 3, size=(300, 3))
    table = agreement.counts_table(choices, 3)
    types = agreement.item_types(table)
    grouped = agreement.bootstrap_interval(
        lambda weights: agreement.weighted_kappa(table[types.representatives], weights, "fleiss"),
        types.multiplicities,
        resamples=4000,
    )
    drawn = np.random.default_rng(3).integers(0, len(table), size=(4000, len(table)))
    by_item = [agreement.fleiss_kappa(table[row]) for row in drawn]
    low, high = np.percentile(by_item, [2.5, 97.5])
    assert grouped.low == pytest.approx(low, abs=0.01)
    assert grouped.high == pytest.approx(high, abs=0.01)


def test_annotator_accuracy_counts_each_annotators_judgments():
    tallies = agreement.annotator_accuracy([("ann", True), ("bob", False), ("ann", False), ("ann", True)])
    assert tallies == {
        "ann": {"judgments": 3, "correct": 2, "accuracy": 2 / 3},
        "bob": {"judgments": 1, "correct": 0, "accuracy": 0.0},
    }


def test_random_accuracy_range_brackets_the_chance_rate():
    interval = agreement.random_accuracy_range(options=3, items=200)
    assert interval.low < 1 / 3 < interval.high
    assert agreement.random_accuracy_range(options=3, items=0) is None
