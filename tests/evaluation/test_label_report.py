"""The report on relevance and quotability studies, computed from Judgment rows and checked
against the reference packages (krippendorff, statsmodels, scikit-learn, scipy) on the same data.

The graded study (relevance, 0-3 scale, four annotators; "-" = not judged):

    item   a1  a2  a3  a4   majority        mean   median
    0      3   3   2   3    3               2.75   3
    1      0   1   0   0    0               0.25   0
    2      2   2   1   -    2               1.67   2
    3      1   2   3   0    tie 0/1/2/3     1.5    1.5
    4      0   0   2   2    tie 0/2         1      1
    5      3   2   3   -    3               2.67   3

Besides these: a hidden gold item (known answer 2: a1 and a3 right, a2 wrong), a qualification
item, a voided judgment and one by an annotator blocked from the study with their judgments
excluded, none of which may reach the statistics.
"""

from dataclasses import dataclass

import krippendorff
import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from annotation.models import Adjudication, Item, StudyBlock
from annotation.services.queue import void_judgment
from evaluation.models import StudyReport
from evaluation.reports import cached_study_report
from evaluation.services import study_report
from tests.factories import (
    add_hits,
    add_label_item,
    add_label_judgment,
    make_label_study,
    make_run,
    make_text_passages,
    make_user,
)

ANNOTATORS = ("a1", "a2", "a3", "a4")
GRADES = [
    [3, 3, 2, 3],
    [0, 1, 0, 0],
    [2, 2, 1, None],
    [1, 2, 3, 0],
    [0, 0, 2, 2],
    [3, 2, 3, None],
]
SECONDS_OF_A1 = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
SCALE = [0, 1, 2, 3]


def reliability_data(rows):
    """Annotators x items, NaN where not judged: the reference packages' layout."""
    return np.array([[np.nan if grade is None else grade for grade in column] for column in zip(*rows)], dtype=float)


@dataclass
class GradedStudy:
    study: object
    items: list
    annotators: dict
    gold: object


@pytest.fixture
def graded(db):
    study = make_label_study(items=len(GRADES), judgments_per_item=4, label_schema={"scale": "graded-0-3"})
    items = list(study.items.order_by("position"))
    annotators = {name: make_user(name) for name in (*ANNOTATORS, "voided", "blocked")}
    for number, (item, row) in enumerate(zip(items, GRADES)):
        for name, grade in zip(ANNOTATORS, row):
            if grade is not None:
                seconds = SECONDS_OF_A1[number] if name == "a1" else None
                add_label_judgment(item, annotators[name], grade, seconds=seconds)
    gold = add_label_item(study, role=Item.Role.GOLD, expected_label=2)
    for name, answer in (("a1", 2), ("a2", 1), ("a3", 2)):
        add_label_judgment(gold, annotators[name], answer)
    qualification = add_label_item(study, role=Item.Role.QUALIFICATION, expected_label=0)
    add_label_judgment(qualification, annotators["a4"], 3)
    void_judgment(add_label_judgment(items[0], annotators["voided"], 0), by=make_user(staff=True), reason="test")
    add_label_judgment(items[1], annotators["blocked"], 3)
    StudyBlock.objects.create(study=study, annotator=annotators["blocked"], reason="ignored the guidelines")
    return GradedStudy(study, items, annotators, gold)


class TestGradedAgreement:
    def test_counts_leave_out_gold_qualification_voided_and_blocked(self, graded):
        report = study_report(graded.study)
        assert report["items"] == 6
        assert report["judgments"] == sum(grade is not None for row in GRADES for grade in row) == 22
        assert report["complete_items"] == 4
        assert report["label_counts"] == {"0": 6, "1": 3, "2": 7, "3": 6}

    @pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
    def test_krippendorff_alpha_at_every_level_of_a_scale(self, graded, level):
        report = study_report(graded.study)
        expected = krippendorff.alpha(reliability_data=reliability_data(GRADES), level_of_measurement=level)
        assert report["agreement"]["krippendorff_alpha"][level] == pytest.approx(expected)

    def test_fleiss_kappa_uses_the_items_every_annotator_judged(self, graded):
        fleiss = study_report(graded.study)["agreement"]["fleiss_kappa"]
        complete = [row for row in GRADES if None not in row]
        table, _ = aggregate_raters(np.array(complete), n_cat=len(SCALE))
        assert fleiss["value"] == pytest.approx(statsmodels_fleiss_kappa(table, method="fleiss"))
        assert (fleiss["units"], fleiss["raters_per_unit"], fleiss["units_left_out"]) == (4, 4, 2)

    @pytest.mark.parametrize("name, weights", [("unweighted", None), ("linear", "linear"), ("quadratic", "quadratic")])
    def test_mean_pairwise_cohen_kappa_with_and_without_weights(self, graded, name, weights):
        kappas = []
        for first in range(4):
            for second in range(first + 1, 4):
                shared = [
                    (row[first], row[second]) for row in GRADES if row[first] is not None and row[second] is not None
                ]
                kappas.append(cohen_kappa_score(*zip(*shared), weights=weights, labels=SCALE))
        kappa = study_report(graded.study)["agreement"]["cohen_kappa"][name]
        assert kappa == {"mean": pytest.approx(np.mean(kappas)), "pairs": 6}

    def test_aggregated_labels_report_ties(self, graded):
        report = study_report(graded.study)
        rows = {entry["item"]: entry for entry in report["aggregates"]}
        tied_all, tied_two = rows[graded.items[3].pk], rows[graded.items[4].pk]
        assert (tied_all["majority"], tied_all["tied_labels"]) == (None, [0, 1, 2, 3])
        assert (tied_two["majority"], tied_two["tied_labels"], tied_two["mean"], tied_two["median"]) == (
            None,
            [0, 2],
            1.0,
            1.0,
        )
        third = rows[graded.items[2].pk]
        assert (third["labels"], third["majority"], third["tied_labels"]) == ([1, 2, 2], 2, [])
        assert third["mean"] == pytest.approx(5 / 3) and third["median"] == 2.0
        assert report["ties"] == 2
        assert [entry["item"] for entry in report["aggregates"]] == [item.pk for item in graded.items]

    def test_per_annotator_statistics(self, graded):
        annotators = study_report(graded.study)["annotators"]
        assert set(annotators) == set(ANNOTATORS)
        a1, a2, a4 = annotators["a1"], annotators["a2"], annotators["a4"]
        assert (a1["judgments"], a1["gold_judgments"], a1["gold_correct"], a1["gold_accuracy"]) == (6, 1, 1, 1.0)
        assert (a2["gold_accuracy"], a4["gold_accuracy"], a4["gold_judgments"]) == (0.0, None, 0)
        # Agreement with the unique majorities of items 0, 1, 2 and 5 (own vote included).
        assert (a1["agreement_with_majority"], a1["majority_units"]) == (1.0, 4)
        assert (a2["agreement_with_majority"], annotators["a3"]["agreement_with_majority"]) == (0.5, 0.5)
        assert (a4["agreement_with_majority"], a4["majority_units"]) == (1.0, 2)
        assert a1["median_seconds"] == 35.0 and a2["median_seconds"] is None

    def test_model_scores_against_mean_human_grades(self, graded):
        collection = graded.study.collection
        run = make_run(collection, kind="dense")
        scores = {0: 0.9, 1: 0.1, 2: 0.7, 4: 0.3, 5: 0.2}  # item 3 is not scored
        for number, score in scores.items():
            item = graded.items[number]
            add_hits(run, item.query, [(item.candidates.get().passage, score)])
        model = study_report(graded.study, [run])["models"][str(run.pk)]
        means = [np.mean([grade for grade in GRADES[number] if grade is not None]) for number in scores]
        rho, kendall = spearmanr(list(scores.values()), means), kendalltau(list(scores.values()), means)
        assert (model["rated_units"], model["covered_units"], model["reason"]) == (6, 5, None)
        assert model["spearman"] == {
            "statistic": pytest.approx(rho.statistic),
            "p_value": pytest.approx(rho.pvalue),
            "items": 5,
        }
        assert model["kendall_tau_b"] == {
            "statistic": pytest.approx(kendall.statistic),
            "p_value": pytest.approx(kendall.pvalue),
            "items": 5,
        }

    def test_a_run_with_too_few_scored_items_gets_no_correlation(self, graded):
        run = make_run(graded.study.collection)
        item = graded.items[0]
        add_hits(run, item.query, [(item.candidates.get().passage, 1.0)])
        model = study_report(graded.study, [run])["models"][str(run.pk)]
        assert (model["covered_units"], model["spearman"], model["kendall_tau_b"]) == (1, None, None)
        assert "at least 3" in model["reason"]


def test_a_binary_scale_is_nominal_only(db):
    rows = [[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 1]]
    study = make_label_study(items=len(rows))
    annotators = [make_user() for _ in range(3)]
    for item, row in zip(study.items.order_by("position"), rows):
        for annotator, label in zip(annotators, row):
            add_label_judgment(item, annotator, label)
    agreement = study_report(study)["agreement"]
    assert set(agreement["krippendorff_alpha"]) == {"nominal"}
    assert agreement["krippendorff_alpha"]["nominal"] == pytest.approx(
        krippendorff.alpha(reliability_data=reliability_data(rows), level_of_measurement="nominal")
    )
    table, _ = aggregate_raters(np.array(rows), n_cat=2)
    assert agreement["fleiss_kappa"]["value"] == pytest.approx(statsmodels_fleiss_kappa(table))
    assert set(agreement["cohen_kappa"]) == {"unweighted"}
    pairs = [cohen_kappa_score([r[i] for r in rows], [r[j] for r in rows]) for i, j in ((0, 1), (0, 2), (1, 2))]
    assert agreement["cohen_kappa"]["unweighted"]["mean"] == pytest.approx(np.mean(pairs))


def test_a_study_without_judgments_reports_nulls(db):
    report = study_report(make_label_study(items=2))
    assert report["judgments"] == 0
    assert report["agreement"]["krippendorff_alpha"] == {"nominal": None}
    assert report["agreement"]["fleiss_kappa"]["value"] is None
    assert report["agreement"]["cohen_kappa"]["unweighted"] == {"mean": None, "pairs": 0}
    assert [entry["majority"] for entry in report["aggregates"]] == [None, None]


# --- spans and rubric ---------------------------------------------------------------------------------

PLOT = "The detective burns the letter at night"  # tokens: The detective burns the letter at night


def span(start, end, target="passage"):
    return {"target": target, "start": start, "end": end}


def test_span_agreement_is_token_f1_and_exact_match_averaged_over_items(db):
    schema = {
        "spans": "passage",
        "rubric": [
            {"name": "specificity", "values": [0, 1]},
            {"name": "quality", "values": [0, 1, 2]},
        ],
    }
    study = make_label_study(label_schema=schema)
    first = add_label_item(study, passages=make_text_passages(study.collection, [PLOT]))
    second = add_label_item(study, passages=make_text_passages(study.collection, [PLOT]))
    a, b, c, d = (make_user() for _ in range(4))
    burns_the_letter = PLOT.index("burns"), PLOT.index(" at")
    the_letter = PLOT.index("the letter"), PLOT.index(" at")
    add_label_judgment(first, a, 1, spans=[span(*burns_the_letter)], rubric={"specificity": 1, "quality": 2})
    add_label_judgment(first, b, 1, spans=[span(*the_letter)], rubric={"specificity": 1, "quality": 1})
    # Same words as a, boundaries drifting by a space: still an exact match.
    add_label_judgment(
        first,
        c,
        1,
        spans=[span(burns_the_letter[0] - 1, burns_the_letter[1] + 1)],
        rubric={"specificity": 0, "quality": 2},
    )
    add_label_judgment(first, d, 0, rubric={"specificity": 0, "quality": 0})  # no span: not compared
    add_label_judgment(second, a, 1, spans=[span(0, 3)], rubric={"specificity": 1, "quality": 2})
    add_label_judgment(second, b, 1, spans=[span(0, 3)], rubric={"specificity": 1, "quality": 1})
    report = study_report(study)
    spans = report["spans"]
    # Item 1: a-b F1 = 2*2/(3+2) = 0.8, a-c 1.0, b-c 0.8; exact match 1 of 3 pairs. Item 2: identical.
    assert (spans["target"], spans["items"], spans["judgments_with_spans"]) == ("passage", 2, 5)
    assert spans["token_f1"] == pytest.approx(((0.8 + 1.0 + 0.8) / 3 + 1.0) / 2)
    assert spans["exact_match"] == pytest.approx((1 / 3 + 1.0) / 2)
    # The marked excerpts' words (the quote-recommendation paper's BOW-F1 and exact match) agree
    # here exactly as the token positions do.
    assert spans["bow_f1"] == pytest.approx(spans["token_f1"])
    assert spans["text_exact_match"] == pytest.approx(spans["exact_match"])
    specificity = [[1, 1, 0, 0], [1, 1, None, None]]
    quality = [[2, 1, 2, 0], [2, 1, None, None]]
    rubric = report["rubric"]
    assert set(rubric["specificity"]["krippendorff_alpha"]) == {"nominal"}
    assert rubric["specificity"]["krippendorff_alpha"]["nominal"] == pytest.approx(
        krippendorff.alpha(reliability_data=reliability_data(specificity), level_of_measurement="nominal")
    )
    for level in ("nominal", "ordinal", "interval"):
        assert rubric["quality"]["krippendorff_alpha"][level] == pytest.approx(
            krippendorff.alpha(reliability_data=reliability_data(quality), level_of_measurement=level)
        ), level
    assert rubric["quality"]["judgments"] == 6


def test_excerpts_with_the_same_words_at_different_places_agree_in_words_but_not_in_tokens(db):
    study = make_label_study(label_schema={"spans": "passage"})
    item = add_label_item(study, passages=make_text_passages(study.collection, [PLOT]))
    second_the = PLOT.index("the letter")
    add_label_judgment(item, make_user(), 1, spans=[span(0, 3)])
    add_label_judgment(item, make_user(), 1, spans=[span(second_the, second_the + 3)])

    spans = study_report(study)["spans"]

    assert (spans["token_f1"], spans["exact_match"]) == (0.0, 0.0)
    assert (spans["bow_f1"], spans["text_exact_match"]) == (1.0, 1.0)


def test_a_study_without_span_marking_has_no_span_section(db):
    assert study_report(make_label_study(items=1))["spans"] is None


# --- quotability ---------------------------------------------------------------------------------------


def quotability_study(rows, judgments_per_item=5, **settings):
    study = make_label_study(kind="quotability", items=len(rows), judgments_per_item=judgments_per_item, **settings)
    annotators = [make_user() for _ in range(max(map(len, rows)))]
    for item, row in zip(study.items.order_by("position"), rows):
        for annotator, label in zip(annotators, row):
            add_label_judgment(item, annotator, label)
    return study


def test_share_judged_quotable_by_majority_with_a_wilson_interval(db):
    rows = [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 1, 1], [1, 0, 1, 1, 0], [1, 1, 1, 1], [0, 1, 1, 1, 1]]
    study = quotability_study(rows, parameters={"runs": [7], "selection": "top_non_gold"})
    share = study_report(study)["quotable_share"]
    # The item with four judgments is not complete; of the five others, four have a "yes" majority.
    low, high = proportion_confint(4, 5, alpha=0.05, method="wilson")
    assert (share["positives"], share["items"], share["share"]) == (4, 5, pytest.approx(0.8))
    assert share["interval"] == {"low": pytest.approx(low), "high": pytest.approx(high)}
    assert (share["method"], share["level"], share["selection"], share["runs"]) == ("wilson", 0.95, "top_non_gold", [7])


def test_ties_count_as_not_quotable_and_adjudication_decides(db):
    study = quotability_study([[1, 0], [1, 1], [0, 0], [1]], judgments_per_item=2)
    items = list(study.items.order_by("position"))
    share = study_report(study)["quotable_share"]
    assert (share["positives"], share["items"], share["ties_counted_not_quotable"]) == (1, 3, 1)
    Adjudication.objects.create(item=items[0], label=1)
    Adjudication.objects.create(item=items[3], label=0)  # incomplete, but adjudicated: counted
    share = study_report(study)["quotable_share"]
    assert (share["positives"], share["items"], share["ties_counted_not_quotable"], share["adjudicated"]) == (
        2,
        4,
        0,
        2,
    )


def test_relevance_studies_have_no_quotable_share(db):
    assert study_report(make_label_study(items=1))["quotable_share"] is None


def test_multi_select_pilot_selection_shares_and_pairwise_overlap(db):
    study = make_label_study(kind="quotability", items=2, candidates=3, label_schema={"multi_select": True})
    first, second = study.items.order_by("position")
    a, b, c = (make_user() for _ in range(3))
    add_label_judgment(first, a, selections=[0, 1])
    add_label_judgment(first, b, selections=[1])
    add_label_judgment(first, c, selections=[1, 2])
    add_label_judgment(second, a, selections=[])
    add_label_judgment(second, b, selections=[])
    report = study_report(study)
    # Item 1: a-b J 1/2, a-c 1/3, b-c 1/2; item 2: both empty, full agreement.
    jaccards = [1 / 2, 1 / 3, 1 / 2]
    assert report["selections"]["items"] == 2
    assert report["selections"]["jaccard"] == pytest.approx((np.mean(jaccards) + 1) / 2)
    assert report["selections"]["f1"] == pytest.approx((np.mean([2 * j / (1 + j) for j in jaccards]) + 1) / 2)
    shares = {(entry["item"], entry["position"]): entry["mean"] for entry in report["aggregates"]}
    assert shares == {
        (first.pk, 0): pytest.approx(1 / 3),
        (first.pk, 1): 1.0,
        (first.pk, 2): pytest.approx(1 / 3),
        (second.pk, 0): 0.0,
        (second.pk, 1): 0.0,
        (second.pk, 2): 0.0,
    }
    # Annotators x paragraphs (selected = 1); c did not judge the second item.
    selected = np.array([[1, 1, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 1, 1, np.nan, np.nan, np.nan]])
    expected = krippendorff.alpha(reliability_data=selected, level_of_measurement="nominal")
    assert report["agreement"]["krippendorff_alpha"]["nominal"] == pytest.approx(expected)
    assert report["quotable_share"] is None and report["units"] == 6


# --- the cache -------------------------------------------------------------------------------------------


class TestCache:
    def test_an_unchanged_study_is_served_from_the_cache(self, graded, computations):
        assert cached_study_report(graded.study) == cached_study_report(graded.study)
        assert len(computations) == 1
        assert StudyReport.objects.filter(study=graded.study).count() == 1

    def test_new_and_voided_judgments_invalidate_it(self, graded, computations):
        assert cached_study_report(graded.study)["judgments"] == 22
        add_label_judgment(graded.items[2], graded.annotators["a4"], 2)
        assert cached_study_report(graded.study)["judgments"] == 23
        void_judgment(graded.items[0].judgments.filter(voided=False).first(), by=make_user(staff=True), reason="dup")
        assert cached_study_report(graded.study)["judgments"] == 22
        assert len(computations) == 3

    def test_a_block_invalidates_it(self, graded, computations):
        assert cached_study_report(graded.study)["annotators"]["a4"]["judgments"] == 4
        StudyBlock.objects.create(study=graded.study, annotator=graded.annotators["a4"], reason="too fast")
        assert "a4" not in cached_study_report(graded.study)["annotators"]
        assert len(computations) == 2

    def test_an_adjudication_invalidates_it(self, graded, computations):
        assert cached_study_report(graded.study)["adjudicated"] == 0
        Adjudication.objects.create(item=graded.items[4], label=2)
        report = cached_study_report(graded.study)
        assert report["adjudicated"] == 1
        assert next(e for e in report["aggregates"] if e["item"] == graded.items[4].pk)["adjudicated"] == 2
        assert len(computations) == 2

    def test_a_gold_answer_invalidates_it(self, graded, computations):
        assert cached_study_report(graded.study)["annotators"]["a4"]["gold_judgments"] == 0
        add_label_judgment(graded.gold, graded.annotators["a4"], 2)
        assert cached_study_report(graded.study)["annotators"]["a4"]["gold_accuracy"] == 1.0
        assert len(computations) == 2
