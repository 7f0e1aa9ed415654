"""The report says when the models on a proxy study cannot be told from guessing: a model is
indistinguishable from chance when the exact binomial interval of its accuracy holds 1/k. The
interval and the test are checked against statsmodels, an independent implementation."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.proportion import binom_test, proportion_confint

from evaluation.chance import against_chance
from evaluation.formatting import chance_line, report_as_text
from evaluation.services import study_report
from tests.factories import add_hits, make_collection, make_proxy_study, make_run, make_user


@st.composite
def outcomes(draw):
    answered = draw(st.integers(min_value=1, max_value=400))
    return draw(st.integers(min_value=0, max_value=answered)), answered, draw(st.integers(min_value=2, max_value=20))


@given(outcomes())
def test_the_interval_and_the_test_match_statsmodels(outcome):
    correct, answered, options = outcome
    verdict = against_chance(correct, answered, options)
    low, high = proportion_confint(correct, answered, alpha=0.05, method="beta")
    assert verdict["interval"]["low"] == pytest.approx(low, abs=1e-9)
    assert verdict["interval"]["high"] == pytest.approx(high, abs=1e-9)
    assert verdict["p_value"] == pytest.approx(binom_test(correct, answered, 1 / options), rel=1e-6, abs=1e-12)
    assert verdict["indistinguishable"] == (low <= 1 / options <= high)


def test_a_third_right_on_three_options_is_chance_and_always_right_is_not():
    assert against_chance(10, 30, 3)["indistinguishable"]
    assert not against_chance(30, 30, 3)["indistinguishable"]
    assert not against_chance(0, 30, 3)["indistinguishable"]  # always wrong is no guesser either


def _run_right_on(collection, study, right: int):
    """A run whose best-scored candidate is the gold on the first `right` items, a negative after."""
    run = make_run(collection, kind="dense")
    for index, item in enumerate(study.items.order_by("position")):
        wanted = item.candidates.get(is_gold=True) if index < right else item.candidates.get(is_gold=False, position=1)
        others = [candidate for candidate in item.candidates.all() if candidate.pk != wanted.pk]
        add_hits(run, item.query, [(wanted.passage, 2.0), *[(candidate.passage, 1.0) for candidate in others]])
    return run


@pytest.fixture
def thirty_items(db):
    collection = make_collection()
    study = make_proxy_study(collection, gold_positions=[0] * 30)
    return collection, study


def test_a_study_whose_only_model_guesses_says_every_model_is_at_chance(thirty_items, client):
    collection, study = thirty_items
    guesser = _run_right_on(collection, study, 10)
    report = study_report(study, [guesser])
    entry = report["chance"]["models"][f"run {guesser.pk}"]
    assert (entry["correct"], entry["answered"], entry["indistinguishable"]) == (10, 30, True)
    assert report["chance"]["all_indistinguishable"] is True
    assert chance_line(report).startswith("Every model on this study is indistinguishable from chance")
    assert "indistinguishable from chance" in report_as_text(report)
    client.force_login(make_user(staff=True))
    page = client.get(f"/studies/{study.pk}/report/", {"model_run": guesser.pk}).content.decode()
    assert "Every model on this study is indistinguishable from chance" in page


def test_a_model_above_chance_is_named_apart_from_the_guesser(thirty_items):
    collection, study = thirty_items
    guesser, reader = _run_right_on(collection, study, 10), _run_right_on(collection, study, 30)
    report = study_report(study, [guesser, reader])
    assert report["chance"]["all_indistinguishable"] is False
    assert not report["chance"]["models"][f"run {reader.pk}"]["indistinguishable"]
    line = chance_line(report)
    assert f"run {guesser.pk}" in line and f"run {reader.pk}" not in line


def test_no_model_no_verdict(thirty_items):
    _, study = thirty_items
    report = study_report(study)
    assert report["chance"]["all_indistinguishable"] is None and chance_line(report) is None
