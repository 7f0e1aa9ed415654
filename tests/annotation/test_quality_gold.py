"""Hidden gold: items with known answers mixed into formal work, indistinguishable from the others
in everything an annotator receives, counted for gold accuracy and never in statistics."""

import math

import pytest

from annotation.models import Item
from annotation.selectors import counted_judgments, gold_judgments
from annotation.services.quality import designate_gold_share, designate_items, gold_accuracy
from retrieval.errors import InputError
from tests.factories import (
    add_judgment,
    add_label_item,
    add_label_judgment,
    api_client,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
)

pytestmark = pytest.mark.django_db

FORBIDDEN_KEYS = {"role", "expected_label", "is_gold", "gold", "source_run", "source_rank", "correct"}


def gold_study(items=10, gold=3, **settings):
    study = make_relic_proxy_study(items, judgments_per_item=1, **settings)
    designate_items(study, Item.Role.GOLD, count=gold)
    return study


def shape(value):
    """The structure of a JSON value: keys and value types, recursively, without the values."""
    if isinstance(value, dict):
        return {key: shape(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [shape(inner) for inner in value]
    return type(value).__name__


def all_keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for inner in value.values() for key in all_keys(inner)}
    if isinstance(value, list):
        return {key for inner in value for key in all_keys(inner)}
    return set()


def served_payloads(study, annotator) -> list[dict]:
    """Every item the annotator is served through the API, answering each (position 0, or
    label 1 in a label study)."""
    client = api_client(annotator)
    answer = {"position": 0} if study.kind == "proxy" else {"label": 1}
    payloads = []
    while True:
        work = client.get(f"/api/annotate/{study.pk}/next/").json()
        if work["finished"]:
            return payloads
        payloads.append(work)
        response = client.post(f"/api/annotate/{study.pk}/submit/", {"item": work["item"], **answer}, format="json")
        assert response.status_code == 201


def relevance_gold_study(items=8, gold=3):
    study = make_label_study(judgments_per_item=1)
    for _ in range(items):
        add_label_item(study, expected_label=1)
    designate_items(study, Item.Role.GOLD, count=gold)
    return study


def test_designated_gold_items_are_spread_among_the_others_not_appended():
    study = gold_study(items=12, gold=4)
    items = list(study.items.order_by("position"))
    gold = [item for item in items if item.role == Item.Role.GOLD]
    assert len(gold) == 4
    by_id = sorted(items, key=lambda item: item.pk)
    assert {item.pk for item in by_id[-4:]} != {item.pk for item in gold}
    by_candidate_id = sorted(items, key=lambda item: min(item.candidates.values_list("pk", flat=True)))
    assert {item.pk for item in by_candidate_id[-4:]} != {item.pk for item in gold}
    assert [item.position for item in gold] != [8, 9, 10, 11]
    again = gold_study(items=12, gold=4)  # same seed, same data: the same draw
    assert [i.position for i in again.items.filter(role=Item.Role.GOLD).order_by("position")] == [
        item.position for item in gold
    ]


@pytest.mark.parametrize("build", [gold_study, relevance_gold_study], ids=["proxy", "relevance"])
def test_gold_and_work_payloads_are_identical_in_shape_and_name_nothing_staff_only(build):
    study = build(items=8, gold=3)
    payloads = served_payloads(study, make_annotator())
    roles = {Item.objects.get(pk=payload["item"]).role for payload in payloads}
    assert roles == {Item.Role.GOLD, Item.Role.WORK}
    gold = next(p for p in payloads if Item.objects.get(pk=p["item"]).role == Item.Role.GOLD)
    work = next(p for p in payloads if Item.objects.get(pk=p["item"]).role == Item.Role.WORK)
    assert shape(gold) == shape(work)
    assert set(gold) == set(work)
    assert not all_keys(gold) & FORBIDDEN_KEYS and not all_keys(work) & FORBIDDEN_KEYS
    assert gold["progress"]["total"] == work["progress"]["total"] == 8


def test_gold_items_come_in_the_same_queue_at_their_place_in_the_study_order():
    study = gold_study(items=8, gold=3)
    payloads = served_payloads(study, make_annotator())
    assert [p["item"] for p in payloads] == list(study.items.order_by("position").values_list("pk", flat=True))


def test_gold_judgments_are_kept_apart_from_counted_judgments():
    study = gold_study(items=6, gold=2)
    annotator = make_annotator()
    for item in study.items.all():
        add_judgment(item, annotator, position=0)
    gold_ids = set(study.items.filter(role=Item.Role.GOLD).values_list("pk", flat=True))
    assert {j.item_id for j in gold_judgments(study)} == gold_ids
    assert not {j.item_id for j in counted_judgments(study)} & gold_ids
    assert counted_judgments(study).count() == 4


def test_gold_accuracy_counts_each_annotators_right_answers_on_gold_items():
    study = gold_study(items=6, gold=4)
    careful, careless = make_annotator("careful"), make_annotator("careless")
    for index, item in enumerate(study.items.filter(role=Item.Role.GOLD).order_by("position")):
        right = item.candidates.get(is_gold=True).position
        add_judgment(item, careful, position=right)
        add_judgment(item, careless, position=right if index == 0 else (right + 1) % 3)
    accuracy = gold_accuracy(study)
    assert accuracy["careful"] == (4, 4, 1.0)
    assert accuracy["careless"] == (1, 4, 0.25)


def test_gold_accuracy_for_labels_compares_with_the_expected_label():
    study = make_label_study()
    items = [add_label_item(study, expected_label=label) for label in (1, 0, 1, 0)]
    designate_items(study, Item.Role.GOLD, items=items[:3])
    annotator = make_annotator("labeller")
    for item, label in zip(items, (1, 1, 1, 1)):
        add_label_judgment(item, annotator, label)
    assert gold_accuracy(study) == {"labeller": (2, 3, 2 / 3)}


def test_the_gold_share_designates_ceil_rate_times_formal_items():
    study = make_relic_proxy_study(11)
    study.gold_rate = 0.2
    designated = designate_gold_share(study)
    assert len(designated) == math.ceil(0.2 * 11) == 3
    assert designate_gold_share(study) == []  # already at the share


def test_the_gold_share_is_exact_where_floats_are_not():
    study = relevance_gold_study(items=25, gold=1)
    study.gold_rate = 0.28  # 0.28 * 25 == 7.000000000000001 in floating point
    assert len(designate_gold_share(study)) == 6
    assert study.items.filter(role=Item.Role.GOLD).count() == 7


def test_only_unjudged_items_with_a_known_answer_can_become_gold():
    study = make_relic_proxy_study(3)
    add_judgment(study.items.first(), make_annotator(), position=0)
    with pytest.raises(InputError, match="only 2 unjudged work items") as refused:
        designate_items(study, Item.Role.GOLD, count=3)
    assert refused.value.field == "count"
    labels = make_label_study(items=2)
    with pytest.raises(InputError, match="no known answer") as unknown:
        designate_items(labels, Item.Role.GOLD, items=list(labels.items.all()))
    assert unknown.value.field == "expected"
    assert not Item.objects.filter(role=Item.Role.GOLD).exists()


def test_expected_answers_given_with_the_items_are_validated_against_the_schema():
    study = make_label_study(items=2, label_schema={"scale": "graded-0-2"})
    first, second = study.items.order_by("position")
    designate_items(study, Item.Role.QUALIFICATION, items=[first], expected={first.pk: 2})
    first.refresh_from_db()
    assert (first.role, first.expected_label) == (Item.Role.QUALIFICATION, 2)
    with pytest.raises(InputError) as refused:
        designate_items(study, Item.Role.GOLD, items=[second], expected={second.pk: 5})
    assert refused.value.field == "expected_label"
    second.refresh_from_db()
    assert second.role == Item.Role.WORK
