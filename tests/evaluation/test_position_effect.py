"""Presentation order and position effects (issue 24.4), driven through the annotator API as
annotators meet it: a study that shuffles candidates per annotator records the order each one
saw with every judgment, reproducibly from the study seed; scripted annotators who always pick
the first option shown produce a position effect the report detects; statistics compare
candidates, not screen places, so annotators who all choose the gold agree wherever they saw it;
a study that keeps one order per item behaves as before. The chi-square statistics are held to
statsmodels' implementations on the same counts."""

import io

import numpy as np
import pytest
from django.core.management import call_command
from statsmodels.stats.contingency_tables import Table
from statsmodels.stats.gof import chisquare as statsmodels_chisquare
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from annotation.models import Item, ItemCandidate, Judgment, Study
from annotation.presentation import annotator_order
from annotation.services.presentation import apply_presentation
from evaluation.services import study_report
from tests.factories import (
    add_label_item,
    api_client,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
    make_user,
    next_url,
    submit_url,
)

pytestmark = pytest.mark.django_db

ITEMS = 12
CANDIDATES = 4


def shuffled_proxy_study(**settings) -> Study:
    study = make_relic_proxy_study(ITEMS, candidates=CANDIDATES, **settings)
    return apply_presentation(study, candidate_order=Study.CandidateOrder.ANNOTATOR)


def gold_candidate_id(item_id: int) -> int:
    return ItemCandidate.objects.get(item_id=item_id, is_gold=True).pk


def annotate_all(study: Study, annotator, choose) -> list[dict]:
    """Ask for items and answer each as `choose(payload)` says ({"position": ...} or
    {"candidate": ...}) until the study has nothing left for the annotator; the payloads seen."""
    client = api_client(annotator)
    seen = []
    while (payload := client.get(next_url(study)).json())["item"] is not None:
        response = client.post(submit_url(study), {"item": payload["item"], **choose(payload)}, format="json")
        assert response.status_code == 201, response.json()
        seen.append(payload)
    return seen


def always_first(payload: dict) -> dict:
    return {"position": 0}


def always_gold(payload: dict) -> dict:
    return {"candidate": gold_candidate_id(payload["item"])}


def test_scripted_annotators_who_always_pick_the_first_option_show_a_position_effect():
    study = shuffled_proxy_study()
    annotators = [make_annotator(f"first-{n}") for n in range(3)]
    for annotator in annotators:
        annotate_all(study, annotator, always_first)

    effect = study_report(study)["position_effect"]

    chosen = [row["chosen"] for row in effect["positions"]]
    assert chosen == [ITEMS * 3, 0, 0, 0]
    assert [row["rate"] for row in effect["positions"]] == [1.0, 0.0, 0.0, 0.0]
    assert [row["expected"] for row in effect["positions"]] == pytest.approx([ITEMS * 3 / CANDIDATES] * CANDIDATES)
    oracle_statistic, oracle_p = statsmodels_chisquare(chosen, [ITEMS * 3 / CANDIDATES] * CANDIDATES)
    assert effect["chi_square"] == pytest.approx(oracle_statistic, rel=1e-12)
    assert effect["p_value"] == pytest.approx(oracle_p, rel=1e-9) and effect["p_value"] < 1e-15
    assert effect["df"] == CANDIDATES - 1 and effect["judgments"] == ITEMS * 3 and effect["order_unknown"] == 0
    # The first place held different candidates for different annotators: their choices, read as
    # candidates, disagree far more than their screen places do.
    choices = {(j.item_id, j.annotator_id): j.choice.position for j in Judgment.objects.select_related("choice")}
    assert len(set(choices.values())) > 1
    assert study_report(study)["all_agree"] < 1.0


def test_the_report_page_and_the_command_show_choices_by_position(client):
    study = shuffled_proxy_study()
    annotate_all(study, make_annotator("first"), always_first)
    client.force_login(make_user(staff=True))
    out = io.StringIO()

    page = client.get(f"/studies/{study.pk}/report/").content.decode()
    call_command("study_report", str(study.pk), stdout=out)

    section = page.split('id="position-effect"')[1].split("</section>")[0]
    assert "<td>1</td><td>12</td><td>12</td><td>100.0%</td><td>3.0</td>" in section
    assert "each annotator saw an order of their own" in section and "chi-square 36.00, df 3" in section
    assert "Choices by position shown" in out.getvalue() and "chi-square 36.00, df 3" in out.getvalue()


def test_annotators_who_always_choose_the_gold_agree_wherever_each_saw_it():
    study = shuffled_proxy_study()
    for n in range(3):
        annotate_all(study, make_annotator(f"expert-{n}"), always_gold)

    report = study_report(study)

    # Kappa's category is the candidate (its item position): perfect agreement.
    assert report["all_agree"] == 1.0 and report["majority_accuracy"] == 1.0
    canonical = [
        [judgment.choice.position for judgment in Judgment.objects.filter(item=item).select_related("choice")]
        for item in study.items.order_by("position")
    ]
    table, _ = aggregate_raters(np.array(canonical))
    assert report["fleiss_kappa"] == pytest.approx(statsmodels_fleiss_kappa(table), abs=1e-12)
    # Read as screen places the same answers would disagree: the orders really differed.
    places = [
        sorted(judgment.shown_order.index(judgment.choice.position) for judgment in item.judgments.all())
        for item in study.items.order_by("position")
    ]
    assert any(len(set(item_places)) > 1 for item_places in places)
    # Every choice was the gold, so choices per place are where the gold was shown.
    effect = report["position_effect"]
    assert [row["chosen"] for row in effect["positions"]] == [row["gold_shown"] for row in effect["positions"]]


def test_orders_are_recorded_per_judgment_and_reproducible_from_the_study_seed():
    study = shuffled_proxy_study(seed=11)
    annotators = [make_annotator(f"reader-{n}") for n in range(3)]
    payloads = {annotator.pk: annotate_all(study, annotator, always_first) for annotator in annotators}

    for judgment in Judgment.objects.select_related("choice"):
        expected = annotator_order(study.seed, judgment.item_id, judgment.annotator_id, CANDIDATES)
        assert judgment.shown_order == expected
        assert judgment.choice.position == expected[0]  # position 0 as shown is this candidate
    # What each annotator was shown is that order: ids in the recorded order, places 0..k-1.
    for annotator_id, seen in payloads.items():
        for payload in seen:
            order = Judgment.objects.get(item_id=payload["item"], annotator_id=annotator_id).shown_order
            by_position = dict(ItemCandidate.objects.filter(item_id=payload["item"]).values_list("position", "pk"))
            assert [candidate["id"] for candidate in payload["candidates"]] == [by_position[p] for p in order]
            assert [candidate["position"] for candidate in payload["candidates"]] == list(range(CANDIDATES))
    orders = [tuple(order) for order in Judgment.objects.values_list("shown_order", flat=True)]
    assert len(set(orders)) > 3  # annotators and items really get different orders
    # Another seed, other orders; the same seed, the same ones.
    orders_with = {seed: [annotator_order(seed, item, 1, CANDIDATES) for item in range(20)] for seed in (11, 12)}
    assert orders_with[11] != orders_with[12]
    assert orders_with[11] == [annotator_order(11, item, 1, CANDIDATES) for item in range(20)]


def test_an_annotator_sees_the_same_order_on_every_request_and_after_an_undo():
    study = shuffled_proxy_study()
    client = api_client(make_annotator())
    first = client.get(next_url(study)).json()
    again = client.get(next_url(study)).json()
    client.post(submit_url(study), {"item": first["item"], "position": 2}, format="json")
    client.post(f"/api/annotate/{study.pk}/undo/")
    after_undo = client.get(next_url(study)).json()

    assert first["candidates"] == again["candidates"] == after_undo["candidates"]
    assert after_undo["item"] == first["item"]


def test_a_study_with_one_order_per_item_shows_and_records_the_items_own_order():
    study = make_relic_proxy_study(ITEMS, candidates=CANDIDATES)
    seen = annotate_all(study, make_annotator(), always_gold)

    assert study.candidate_order == Study.CandidateOrder.ITEM
    for payload in seen:
        ids = list(
            ItemCandidate.objects.filter(item_id=payload["item"]).order_by("position").values_list("pk", flat=True)
        )
        assert [candidate["id"] for candidate in payload["candidates"]] == ids
    assert {tuple(order) for order in Judgment.objects.values_list("shown_order", flat=True)} == {
        tuple(range(CANDIDATES))
    }
    effect = study_report(study)["position_effect"]
    # The study's design puts the gold at every position equally often: 12 items, 4 places.
    assert [row["gold_shown"] for row in effect["positions"]] == [3, 3, 3, 3]
    assert [row["chosen"] for row in effect["positions"]] == [3, 3, 3, 3]
    assert effect["chi_square"] == 0.0 and effect["p_value"] == pytest.approx(1.0)


def test_imported_judgments_without_an_order_count_as_the_items_order_only_where_every_annotator_saw_it():
    study = make_relic_proxy_study(4, candidates=3)
    annotator = make_annotator()
    for item in study.items.all():
        Judgment.objects.create(
            item=item, annotator=annotator, choice=item.candidates.get(position=1), source=Judgment.Source.IMPORT
        )

    kept = study_report(study)["position_effect"]
    Study.objects.filter(pk=study.pk).update(candidate_order=Study.CandidateOrder.ANNOTATOR)
    study.refresh_from_db()
    unknown = study_report(study)["position_effect"]

    assert [row["chosen"] for row in kept["positions"]] == [0, 4, 0] and kept["order_unknown"] == 0
    assert unknown["judgments"] == 0 and unknown["order_unknown"] == 4 and unknown["p_value"] is None


def test_multi_select_selections_by_position_shown_are_tested_for_one_rate():
    study = make_label_study(kind=Study.Kind.QUOTABILITY, candidates=4, label_schema={"multi_select": True})
    for _ in range(10):
        add_label_item(study, candidates=4)
    apply_presentation(study, candidate_order=Study.CandidateOrder.ANNOTATOR)
    annotators = [make_annotator(f"selector-{n}") for n in range(3)]
    for n, annotator in enumerate(annotators):
        # Each selects whatever is shown first, and one more place of their own (positions as shown).
        annotate_all(study, annotator, lambda payload, n=n: {"selections": [0, n] if n else [0]})

    report = study_report(study)
    effect = report["position_effect"]

    assert [row["selected"] for row in effect["positions"]] == [30, 10, 10, 0]
    assert [row["shown"] for row in effect["positions"]] == [30, 30, 30, 30]
    assert [row["rate"] for row in effect["positions"]] == pytest.approx([1, 1 / 3, 1 / 3, 0])
    oracle = Table(np.array([[30, 10, 10, 0], [0, 20, 20, 30]]), shift_zeros=False).test_nominal_association()
    assert effect["chi_square"] == pytest.approx(oracle.statistic, rel=1e-12)
    assert effect["p_value"] == pytest.approx(oracle.pvalue, rel=1e-9) and effect["p_value"] < 1e-9
    assert effect["df"] == oracle.df == 3
    # Stored selections are candidates (item positions), as the recorded orders say.
    for judgment in Judgment.objects.select_related("annotator"):
        n = annotators.index(judgment.annotator)
        places = [0, n] if n else [0]
        assert judgment.selections == sorted(judgment.shown_order[place] for place in places)


def test_single_passage_label_studies_have_no_position_section_and_record_their_one_passage():
    study = make_label_study(items=2)
    annotate_all(study, make_annotator(), lambda payload: {"label": 1})

    assert study_report(study)["position_effect"] is None
    assert set(map(tuple, Judgment.objects.values_list("shown_order", flat=True))) == {(0,)}


def test_answer_positions_out_of_range_are_refused_in_the_annotators_own_numbers():
    study = shuffled_proxy_study()
    client = api_client(make_annotator())
    item = client.get(next_url(study)).json()["item"]

    wrong = client.post(submit_url(study), {"item": item, "position": CANDIDATES}, format="json")
    stored = client.post(submit_url(study), {"item": item, "position": 1}, format="json")

    assert wrong.status_code == 400 and f"no candidate at position {CANDIDATES}" in wrong.json()["detail"]
    # The answer comes back as the annotator gave it (the place shown), not the item position.
    assert stored.status_code == 201 and stored.json()["position"] == 1
    judgment = Judgment.objects.get()
    assert judgment.choice.position == judgment.shown_order[1]
    assert Item.objects.get(pk=item).study_id == study.pk
