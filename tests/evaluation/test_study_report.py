"""The study report: agreement over complete items, human and model accuracy, paired tests,
error-analysis lists and the cache that follows the judgments."""

import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from annotation.models import Adjudication, AnnotatorProfile, Item, ItemCandidate, Judgment, Study, StudyBlock
from annotation.services.queue import void_judgment
from evaluation import services
from evaluation.models import StudyReport
from evaluation.reports import cached_study_report, resolve_model_runs
from evaluation.selectors import report_fingerprint, shown_items
from evaluation.services import study_report
from retrieval.errors import InputError
from tests.evaluation.conftest import COMPLETE_COUNTS
from tests.factories import (
    add_hits,
    add_judgment,
    make_collection,
    make_proxy_study,
    make_run,
    make_user,
    set_item_role,
)

CONTRACT_KEYS = {
    "items",
    "judgments",
    "fleiss_kappa",
    "randolph_kappa",
    "all_agree",
    "none_agree",
    "majority_accuracy",
    "annotator_accuracy",
    "model_accuracy",
    "random_baseline",
}


def test_report_has_the_contract_keys(hand_worked):
    report = study_report(hand_worked.study, [hand_worked.dense])
    assert report.keys() >= CONTRACT_KEYS
    assert {"fleiss_kappa", "all_agree", "none_agree", "majority_accuracy", "accuracy"} <= report[
        "random_baseline"
    ].keys()


def test_agreement_counts_only_items_with_every_judgment(hand_worked):
    report = study_report(hand_worked.study)
    assert report["items"] == 6
    assert report["complete_items"] == 5
    assert report["excluded_items"]["incomplete"] == [hand_worked.items[4].pk]
    assert report["judgments"] == 17
    assert report["fleiss_kappa"] == pytest.approx(statsmodels_fleiss_kappa(COMPLETE_COUNTS, method="fleiss"))
    assert report["randolph_kappa"] == pytest.approx(statsmodels_fleiss_kappa(COMPLETE_COUNTS, method="randolph"))
    assert report["all_agree"] == pytest.approx(3 / 5)
    assert report["none_agree"] == pytest.approx(1 / 5)
    assert report["majority_accuracy"] == pytest.approx(3 / 5)


def test_annotator_accuracy_uses_all_their_counted_judgments(hand_worked):
    report = study_report(hand_worked.study)
    assert report["annotator_accuracy"] == pytest.approx({"ann1": 4 / 6, "ann2": 3 / 6, "ann3": 3 / 5})
    assert report["annotators"]["ann3"] == {"judgments": 5, "correct": 3, "accuracy": pytest.approx(3 / 5)}


def test_intervals_contain_the_point_estimates(hand_worked):
    report = study_report(hand_worked.study)
    for key, interval in report["confidence_intervals"].items():
        assert interval["low"] <= report[key] <= interval["high"], key
    assert report["confidence"] == {
        "level": 0.95,
        "method": "percentile bootstrap over items",
        "resamples": 2000,
        "seed": 0,
    }


def test_random_baseline_for_three_options_and_three_judgments(hand_worked):
    random = study_report(hand_worked.study)["random_baseline"]
    assert random["fleiss_kappa"] == 0
    assert random["all_agree"] == pytest.approx(1 / 9)
    assert random["none_agree"] == pytest.approx(2 / 9)
    assert random["majority_accuracy"] == pytest.approx(7 / 27)
    assert random["accuracy"] == pytest.approx(1 / 3)
    assert random["accuracy_range"]["low"] <= 1 / 3 <= random["accuracy_range"]["high"]


def test_model_answer_is_its_best_scoring_shown_candidate(hand_worked):
    answers = services.model_answers(hand_worked.dense, hand_worked.study, shown_items(hand_worked.study))
    positions = [answers[item.pk].position if answers[item.pk] else None for item in hand_worked.items]
    # item 2: only the gold was stored; item 3: nothing shown was stored; item 4: a score tie
    # goes to the candidate the run ranked first.
    assert positions == [0, 0, 2, None, 1, 2]


def test_model_accuracy_coverage_and_paired_test(hand_worked):
    report = study_report(hand_worked.study, [hand_worked.dense])
    model = report["models"][str(hand_worked.dense.pk)]
    assert report["model_accuracy"] == {str(hand_worked.dense.pk): pytest.approx(3 / 5)}
    assert model["comparable"] is True
    assert (model["covered_items"], model["items"], model["coverage"]) == (5, 6, pytest.approx(5 / 6))
    # Paired on items complete for humans and covered by the model: 0, 1, 2, 5.
    # Model right/humans wrong on item 2; humans right/model wrong on items 1 and 5.
    test = model["mcnemar"]
    assert (test["paired_items"], test["model_only_correct"], test["humans_only_correct"]) == (4, 1, 2)
    assert test["p_value"] == pytest.approx(mcnemar([[1, 1], [2, 0]], exact=True).pvalue)


def test_a_run_that_supplied_the_negatives_is_not_comparable(hand_worked):
    report = study_report(hand_worked.study, [hand_worked.bm25, hand_worked.dense])
    bm25 = report["models"][str(hand_worked.bm25.pk)]
    assert report["model_accuracy"][str(hand_worked.bm25.pk)] is None
    assert bm25["comparable"] is False
    assert "negatives" in bm25["reason"]
    assert str(hand_worked.bm25.pk) not in report["error_analysis"]["humans_agree_model_fails"]


def test_a_run_that_supplied_any_shown_candidate_is_not_comparable(db):
    collection = make_collection()
    other = make_run(collection, kind="dense")
    study = make_proxy_study(collection, gold_positions=[0])
    ItemCandidate.objects.filter(item__study=study, position=1).update(source_run=other, source_rank=1)
    report = study_report(study, [other])
    assert report["models"][str(other.pk)]["comparable"] is False


def test_error_analysis_lists(hand_worked):
    report = study_report(hand_worked.study, [hand_worked.dense])
    unanimous_wrong = report["error_analysis"]["unanimous_non_gold"]
    assert [(entry["item"], entry["gold"], entry["chosen"], entry["votes"]) for entry in unanimous_wrong] == [
        (hand_worked.items[3].pk, 0, 2, [0, 0, 3])
    ]
    fails = report["error_analysis"]["humans_agree_model_fails"][str(hand_worked.dense.pk)]
    assert [(entry["item"], entry["model_answer"]) for entry in fails] == [(hand_worked.items[5].pk, 2)]


def test_voided_judgments_do_not_count(hand_worked):
    staff = make_user("lead", staff=True)
    void_judgment(hand_worked.items[3].judgments.first(), by=staff, reason="misread the task")
    report = study_report(hand_worked.study)
    assert report["judgments"] == 16
    assert report["complete_items"] == 4
    assert hand_worked.items[3].pk in report["excluded_items"]["incomplete"]
    assert report["error_analysis"]["unanimous_non_gold"] == []


def test_model_runs_must_exist_and_rank_the_studys_collection(hand_worked):
    elsewhere = make_run(make_collection())
    with pytest.raises(InputError, match="collection"):
        resolve_model_runs(hand_worked.study, [elsewhere.pk])
    with pytest.raises(InputError, match="no run with id 999999"):
        resolve_model_runs(hand_worked.study, [999999])
    with pytest.raises(InputError, match="not a number"):
        resolve_model_runs(hand_worked.study, ["abc"])
    assert resolve_model_runs(hand_worked.study, [str(hand_worked.dense.pk), hand_worked.bm25.pk]) == sorted(
        [hand_worked.dense, hand_worked.bm25], key=lambda run: run.pk
    )


def test_only_proxy_studies_get_the_proxy_report(db):
    study = make_proxy_study(gold_positions=[0])
    Study.objects.filter(pk=study.pk).update(kind=Study.Kind.RELEVANCE)
    study.refresh_from_db()
    with pytest.raises(InputError, match="relevance study"):
        services.proxy_study_report(study)
    assert "agreement" in study_report(study)  # study_report gives a label study its own report


def test_a_study_without_judgments_reports_undefined_statistics_as_null(db):
    report = study_report(make_proxy_study(gold_positions=[0, 1]))
    assert report["complete_items"] == 0
    assert report["fleiss_kappa"] is None and report["majority_accuracy"] is None
    assert report["confidence_intervals"]["fleiss_kappa"] is None


def test_a_model_is_scored_before_anyone_has_judged(db):
    collection = make_collection()
    study = make_proxy_study(collection, gold_positions=[1])
    item = study.items.get()
    run = make_run(collection, kind="dense")
    add_hits(run, item.query, [(item.candidates.get(position=1).passage, 2.0)])
    report = study_report(study, [run])
    model = report["models"][str(run.pk)]
    assert (model["accuracy"], model["coverage"]) == (1.0, 1.0)
    assert model["mcnemar"] == {"paired_items": 0, "model_only_correct": 0, "humans_only_correct": 0, "p_value": 1.0}


class TestCache:
    def test_an_unchanged_study_is_served_from_the_cache(self, hand_worked, computations):
        first = cached_study_report(hand_worked.study, [hand_worked.dense])
        second = cached_study_report(hand_worked.study, [hand_worked.dense])
        assert first == second
        assert len(computations) == 1
        assert StudyReport.objects.filter(study=hand_worked.study).count() == 1

    def test_a_new_judgment_invalidates_it(self, hand_worked, computations):
        assert cached_study_report(hand_worked.study)["complete_items"] == 5
        add_judgment(hand_worked.items[4], hand_worked.annotators[2], 1)
        assert cached_study_report(hand_worked.study)["complete_items"] == 6
        assert len(computations) == 2
        assert StudyReport.objects.filter(study=hand_worked.study).count() == 1

    def test_a_voided_judgment_invalidates_it(self, hand_worked, computations):
        assert cached_study_report(hand_worked.study)["judgments"] == 17
        void_judgment(hand_worked.items[0].judgments.first(), by=make_user(staff=True), reason="duplicate")
        assert cached_study_report(hand_worked.study)["judgments"] == 16
        assert len(computations) == 2

    def test_new_hits_of_a_compared_run_invalidate_it(self, hand_worked, computations):
        item = hand_worked.items[3]
        before = cached_study_report(hand_worked.study, [hand_worked.dense])
        add_hits(hand_worked.dense, item.query, [])  # no change: still cached
        cached_study_report(hand_worked.study, [hand_worked.dense])
        assert len(computations) == 1
        gold = item.candidates.get(is_gold=True).passage
        hand_worked.dense.hits.create(query=item.query, passage=gold, rank=2, score=1.0)
        after = cached_study_report(hand_worked.study, [hand_worked.dense])
        assert len(computations) == 2
        run_id = str(hand_worked.dense.pk)
        assert (before["models"][run_id]["covered_items"], after["models"][run_id]["covered_items"]) == (5, 6)

    def test_each_set_of_model_runs_has_its_own_entry(self, hand_worked, computations):
        cached_study_report(hand_worked.study)
        cached_study_report(hand_worked.study, [hand_worked.dense])
        cached_study_report(hand_worked.study, [hand_worked.dense, hand_worked.bm25])
        cached_study_report(hand_worked.study, [hand_worked.bm25, hand_worked.dense])
        assert len(computations) == 3
        keys = set(StudyReport.objects.values_list("model_runs_key", flat=True))
        runs = sorted([hand_worked.dense.pk, hand_worked.bm25.pk])
        assert keys == {"", str(hand_worked.dense.pk), f"{runs[0]},{runs[1]}"}


# The fingerprint sums the large tables up in the database instead of reading them: each change its
# docstring names still changes it, including those that keep a table's row count.


def _fingerprint(hand_worked) -> str:
    return report_fingerprint(hand_worked.study, [hand_worked.dense])


def _set_item(item, **fields):
    Item.objects.filter(pk=item.pk).update(**fields)


def _a_new_judgment(w):
    add_judgment(w.items[4], w.annotators[2], 1)


def _a_voided_judgment(w):
    void_judgment(w.items[0].judgments.first(), by=make_user(staff=True), reason="duplicate")


def _a_deleted_judgment(w):
    w.items[0].judgments.first().delete()


def _a_judgment_deleted_and_another_added(w):
    w.items[0].judgments.get(annotator=w.annotators[0]).delete()
    add_judgment(w.items[4], w.annotators[2], 1)


def _a_block_excluding_judgments(w):
    StudyBlock.objects.create(study=w.study, annotator=w.annotators[0], reason="too fast")


def _a_block_keeping_judgments_made_excluding(w):
    StudyBlock.objects.filter(study=w.study).update(exclude_judgments=True)


def _an_annotator_blocked_everywhere(w):
    AnnotatorProfile.objects.create(user=w.annotators[1], blocked=True, blocked_reason="spam")


def _an_adjudication(w):
    Adjudication.objects.create(item=w.items[2], choice=w.items[2].candidates.get(position=2))


def _an_item_made_hidden_gold(w):
    _set_item(w.items[1], role=Item.Role.GOLD)


def _hidden_gold_moved_to_another_item(w):
    _set_item(w.items[1], role=Item.Role.WORK)
    _set_item(w.items[2], role=Item.Role.GOLD)


def _a_known_answer_given(w):
    _set_item(w.items[1], expected_label=1)


def _a_known_answer_changed(w):
    _set_item(w.items[3], expected_label=2)


def _a_study_setting(w):
    Study.objects.filter(pk=w.study.pk).update(judgments_per_item=2)
    w.study.refresh_from_db()


def _a_new_hit_of_a_compared_run(w):
    item = w.items[3]
    w.dense.hits.create(query=item.query, passage=item.candidates.get(is_gold=True).passage, rank=2, score=1.0)


def _starting_with_a_block_keeping_judgments(w):
    StudyBlock.objects.create(study=w.study, annotator=w.annotators[0], reason="warned", exclude_judgments=False)


def _starting_with_hidden_gold_and_a_known_answer(w):
    _set_item(w.items[1], role=Item.Role.GOLD)
    _set_item(w.items[3], expected_label=1)


@pytest.mark.parametrize(
    ("before", "change"),
    [
        (None, _a_new_judgment),
        (None, _a_voided_judgment),
        (None, _a_deleted_judgment),
        (None, _a_judgment_deleted_and_another_added),
        (None, _a_block_excluding_judgments),
        (_starting_with_a_block_keeping_judgments, _a_block_keeping_judgments_made_excluding),
        (None, _an_annotator_blocked_everywhere),
        (None, _an_adjudication),
        (None, _an_item_made_hidden_gold),
        (_starting_with_hidden_gold_and_a_known_answer, _hidden_gold_moved_to_another_item),
        (None, _a_known_answer_given),
        (_starting_with_hidden_gold_and_a_known_answer, _a_known_answer_changed),
        (None, _a_study_setting),
        (None, _a_new_hit_of_a_compared_run),
    ],
    ids=lambda step: step.__name__.strip("_").replace("_", " ") if step else "as built",
)
def test_each_change_the_report_depends_on_changes_its_fingerprint(hand_worked, before, change):
    if before is not None:
        before(hand_worked)
    unchanged = _fingerprint(hand_worked)
    change(hand_worked)
    assert _fingerprint(hand_worked) != unchanged


def test_the_fingerprint_ignores_other_studies(hand_worked):
    unchanged = _fingerprint(hand_worked)
    other = make_proxy_study(make_collection(), gold_positions=[0, 1])
    for item in other.items.all():
        add_judgment(item, hand_worked.annotators[0], 0)
    void_judgment(Judgment.objects.filter(item__study=other).first(), by=make_user(staff=True), reason="duplicate")
    assert _fingerprint(hand_worked) == unchanged


def test_hidden_gold_items_measure_annotators_without_entering_the_statistics(hand_worked):
    from annotation.models import Item

    gold_item = hand_worked.items[1]
    set_item_role(gold_item, Item.Role.GOLD)
    report = study_report(hand_worked.study)
    assert report["items"] == 5 and report["judgments"] == 14
    # Item 1 (gold at position 1): ann1 and ann2 chose it, ann3 did not.
    assert report["gold_accuracy"] == {
        "ann1": {"judgments": 1, "correct": 1, "accuracy": 1.0},
        "ann2": {"judgments": 1, "correct": 1, "accuracy": 1.0},
        "ann3": {"judgments": 1, "correct": 0, "accuracy": 0.0},
    }
