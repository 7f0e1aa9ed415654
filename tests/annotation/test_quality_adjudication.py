"""Adjudication: the items whose counted judgments disagree, and staff's final answer for them."""

import pytest

from annotation.models import Adjudication, Item
from annotation.services.quality import (
    adjudicate,
    block_annotator,
    designate_items,
    disagreement_counts,
    disagreement_items,
)
from retrieval.errors import InputError
from tests.factories import (
    add_judgment,
    add_label_judgment,
    make_annotator,
    make_bulk_proxy_study,
    make_label_study,
    make_relic_proxy_study,
    make_user,
)

pytestmark = pytest.mark.django_db


def test_proxy_items_with_different_choices_are_listed_with_their_answer_counts():
    study = make_relic_proxy_study(3)
    first, second, third = study.items.order_by("position")
    people = [make_annotator() for _ in range(3)]
    for person in people:
        add_judgment(first, person, position=1)
    for person, position in zip(people, (0, 2, 2)):
        add_judgment(second, person, position=position)
    add_judgment(third, people[0], position=0)
    rows = disagreement_items(study)
    assert [row["item"] for row in rows] == [second.pk]
    row = rows[0]
    assert row["answers"] == [{"answer": 2, "count": 2}, {"answer": 0, "count": 1}]
    assert row["judgments"] == 3 and row["range"] is None and row["adjudication"] is None
    assert row["gold_position"] == second.candidates.get(is_gold=True).position


def test_scale_labels_disagree_when_their_range_is_above_zero():
    study = make_label_study(items=3, label_schema={"scale": "graded-0-3"})
    unanimous, spread, close = study.items.order_by("position")
    people = [make_annotator() for _ in range(3)]
    for person, (a, b, c) in zip(people, [(2, 0, 1), (2, 3, 2), (2, 3, 2)]):
        add_label_judgment(unanimous, person, a)
        add_label_judgment(spread, person, b)
        add_label_judgment(close, person, c)
    rows = {row["item"]: row for row in disagreement_items(study)}
    assert set(rows) == {spread.pk, close.pk}
    assert rows[spread.pk]["range"] == 3 and rows[close.pk]["range"] == 1
    assert disagreement_counts(study) == (2, 0)


def test_multi_select_answers_disagree_when_the_selected_sets_differ():
    study = make_label_study(items=2, candidates=3, kind="quotability", label_schema={"multi_select": True})
    same, different = study.items.order_by("position")
    first, second = make_annotator(), make_annotator()
    add_label_judgment(same, first, selections=[0, 2])
    add_label_judgment(same, second, selections=[0, 2])
    add_label_judgment(different, first, selections=[0])
    add_label_judgment(different, second, selections=[0, 1])
    rows = disagreement_items(study)
    assert [row["item"] for row in rows] == [different.pk]
    assert sorted(answer["answer"] for answer in rows[0]["answers"]) == [[0], [0, 1]]
    assert disagreement_counts(study) == (1, 0)


def test_only_counted_judgments_make_a_disagreement():
    study = make_relic_proxy_study(1)
    item = study.items.get()
    agreeing = [make_annotator(), make_annotator()]
    for person in agreeing:
        add_judgment(item, person, position=1)
    outlier = make_annotator()
    add_judgment(item, outlier, position=0)
    assert len(disagreement_items(study)) == 1 and disagreement_counts(study) == (1, 0)
    block_annotator(study, outlier, by=None, reason="spam")
    assert disagreement_items(study) == [] and disagreement_counts(study) == (0, 0)


def test_the_overview_counts_disagreements_and_adjudications_as_the_list_has_them():
    """The quality overview counts in the database what disagreement_items lists."""
    study = make_bulk_proxy_study(60, gold_share=0.5, seed=7)
    disputed = disagreement_items(study)
    staff = make_user(staff=True)
    for row in disputed[:4]:
        adjudicate(Item.objects.get(pk=row["item"]), by=staff, position=0)
    agreed = next(item for item in study.items.all() if item.pk not in {row["item"] for row in disputed})
    adjudicate(agreed, by=staff, position=0)  # adjudicated without a disagreement: not counted

    assert disagreement_counts(study) == (len(disputed), 4)
    assert sum(row["adjudication"] is not None for row in disagreement_items(study)) == 4


def test_staff_decide_the_final_answer_and_may_revise_it():
    study = make_relic_proxy_study(2)
    item = study.items.order_by("position").first()
    first_staff, second_staff = make_user(staff=True), make_user(staff=True)
    decided = adjudicate(item, by=first_staff, position=1, note=" both readings defensible ")
    assert (decided.choice.position, decided.note, decided.decided_by) == (1, "both readings defensible", first_staff)
    revised = adjudicate(item, by=second_staff, position=2)
    assert Adjudication.objects.count() == 1
    assert (revised.choice.position, revised.decided_by) == (2, second_staff)
    assert revised.decided_at >= decided.decided_at


def test_labels_are_adjudicated_with_a_label_from_the_schema():
    study = make_label_study(
        items=1, label_schema={"scale": "graded-0-2", "rubric": [{"name": "quality", "values": [0, 1]}]}
    )
    item = study.items.get()
    staff = make_user(staff=True)
    assert adjudicate(item, by=staff, label=2).label == 2
    with pytest.raises(InputError) as refused:
        adjudicate(item, by=staff, label=3)
    assert refused.value.field == "label"
    assert Adjudication.objects.get().label == 2


def test_invalid_or_misplaced_adjudications_are_refused():
    study = make_relic_proxy_study(3)
    work, gold = study.items.order_by("position")[:2]
    designate_items(study, Item.Role.GOLD, items=[gold])
    staff = make_user(staff=True)
    with pytest.raises(InputError) as wrong_position:
        adjudicate(work, by=staff, position=9)
    assert wrong_position.value.field == "position"
    with pytest.raises(InputError) as known_answer:
        adjudicate(gold, by=staff, position=0)
    assert known_answer.value.field == "item"
    assert not Adjudication.objects.exists()
