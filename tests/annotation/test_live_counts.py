"""Each item's stored live-judgment figures (annotation.services.live_counts) stay equal to a fresh
count of its judgments after every path that writes judgments: a web submission, a void, the data
manager's bulk void (all judgments or one annotator's) and send-back, the adjudication
workspace's send-back, undo, a revision and an import; and the data manager's status and
agreement filters read them. The fresh count is made here in Python from the judgment rows."""

import json
from importlib import import_module

import pytest
from django.apps import apps

from annotation.models import Item, Judgment, Study
from annotation.services import adjudication, claim_next_item, quality, submit_judgment, void_judgment
from annotation.services.annotator_actions import undo_last_submission
from annotation.services.quality import block_annotator
from annotation.services.revisions import revise_judgment
from annotation.services.rework import send_back, void_judgments
from console.data_selectors import ItemFilters, filtered_items
from tests.factories import (
    add_label_judgment,
    call_json_command,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
    make_user,
    write_jsonl,
)

pytestmark = pytest.mark.django_db


def answer_of(study: Study, judgment: Judgment):
    if study.kind == Study.Kind.PROXY:
        return judgment.choice_id
    if study.label_schema.get("multi_select"):
        return tuple(sorted(judgment.selections))
    return json.dumps(judgment.label)


def recounted(study: Study) -> dict[int, tuple[int, int]]:
    """item id -> (live judgments, different answers among them), counted from the rows."""
    figures = {}
    for item in study.items.all():
        live = [judgment for judgment in Judgment.objects.filter(item=item) if not judgment.voided]
        figures[item.pk] = (len(live), len({answer_of(study, judgment) for judgment in live}))
    return figures


def stored(study: Study) -> dict[int, tuple[int, int]]:
    return {
        pk: (live, answers) for pk, live, answers in study.items.values_list("pk", "live_judgments", "live_answers")
    }


def assert_counts_hold(study: Study) -> None:
    assert stored(study) == recounted(study)


def answer_next(study: Study, annotator, position: int) -> Judgment | None:
    claim = claim_next_item(study, annotator)
    if claim is None:
        return None
    return submit_judgment(annotator=annotator, item=claim.item, position=position, seconds=3).judgment


def test_every_path_that_writes_judgments_keeps_the_stored_counts_equal_to_a_recount(tmp_path):
    study = make_relic_proxy_study(6, judgments_per_item=3)
    Study.objects.filter(pk=study.pk).update(allow_revisions=True)
    study.refresh_from_db()
    staff = make_user("curator", staff=True)
    people = [make_annotator(f"ann{n}") for n in range(3)]
    for n, person in enumerate(people):  # the first two agree, the third differs on every item
        while answer_next(study, person, 0 if n < 2 else 1) is not None:
            pass
    assert_counts_hold(study)
    assert set(stored(study).values()) == {(3, 2)}

    items = list(study.items.order_by("position"))
    void_judgment(Judgment.objects.filter(item=items[0]).first(), by=staff, reason="slipped")
    assert_counts_hold(study)
    void_judgments(study, Item.objects.filter(pk=items[1].pk), by=staff, reason="pilot", annotator=people[2])
    assert_counts_hold(study)
    assert stored(study)[items[1].pk] == (2, 1)
    void_judgments(study, Item.objects.filter(pk__in=[items[2].pk, items[3].pk]), by=staff, reason="batch")
    assert_counts_hold(study)
    send_back(study, Item.objects.filter(pk=items[4].pk), by=staff, reason="unclear item")
    assert_counts_hold(study)
    adjudication.send_back(items[5], by=staff, reason="Annotator error")
    assert_counts_hold(study)

    newcomer = make_annotator("newcomer")
    revised = answer_next(study, newcomer, 2)
    assert_counts_hold(study)
    revise_judgment(revised, newcomer, position=0)
    assert_counts_hold(study)
    answer_next(study, newcomer, 1)
    undo_last_submission(study, newcomer)
    assert_counts_hold(study)

    late = [make_annotator(f"late{n}") for n in range(2)]
    gold = {item.pk: item.candidates.get(is_gold=True).passage.external_id for item in items[2:4]}
    rows = [
        {"item": item_id, "annotator": person.username, "choice": gold[item_id]} for item_id in gold for person in late
    ]
    before = stored(study)
    assert call_json_command("import_judgments", study.pk, write_jsonl(tmp_path / "late.jsonl", rows))["rejected"] == 0
    assert_counts_hold(study)
    assert all(stored(study)[item_id][0] == before[item_id][0] + 2 for item_id in gold)


def test_a_multi_select_studys_answers_are_its_selected_positions():
    study = make_label_study(items=1, candidates=3, kind="quotability", label_schema={"multi_select": True})
    item = study.items.get()
    for name, selections in (("a", [0]), ("b", [0]), ("c", [0, 1])):
        add_label_judgment(item, make_annotator(name), selections=selections)
    assert_counts_hold(study)
    assert stored(study)[item.pk] == (3, 2)


def test_the_data_managers_status_and_agreement_filters_read_the_stored_counts():
    study = make_label_study(items=4, judgments_per_item=3)
    items = list(study.items.order_by("position"))
    people = [make_annotator(f"p{n}") for n in range(3)]
    for person in people:  # item 0: unanimous; item 1: split (1, 1, 0); item 2: one answer
        add_label_judgment(items[0], person, label=1)
    for person, label in zip(people, (1, 1, 0), strict=True):
        add_label_judgment(items[1], person, label=label)
    add_label_judgment(items[2], people[0], label=1)

    def positions(**filters) -> list[int]:
        return list(filtered_items(study, ItemFilters(**filters)).values_list("position", flat=True))

    assert positions(status="complete") == [0, 1]
    assert positions(status="partial") == [2]
    assert positions(status="unjudged") == [3]
    assert positions(agreement="unanimous") == [0]
    assert positions(agreement="split") == [1]
    assert positions(agreement="none") == []
    assert positions(sort="-judgments") == [0, 1, 2, 3]


def test_the_migration_counts_the_items_that_existed_before_it():
    study = make_relic_proxy_study(2, judgments_per_item=2)
    people = [make_annotator(f"m{n}") for n in range(2)]
    for n, person in enumerate(people):
        while answer_next(study, person, n) is not None:
            pass
    Item.objects.update(live_judgments=0, live_answers=0)  # as the new columns start
    import_module("annotation.migrations.0013_staff_pages_item_live_counts").count_live_judgments(apps, None)
    assert_counts_hold(study)
    assert set(stored(study).values()) == {(2, 2)}


def disputed_ids(subquery) -> set[int]:
    return set(Item.objects.filter(pk__in=subquery).values_list("pk", flat=True))


def test_the_disputed_items_read_from_the_stored_counts_are_those_the_judgments_give():
    study = make_label_study(items=5, judgments_per_item=3)
    items = list(study.items.order_by("position"))
    people = [make_annotator(f"d{n}") for n in range(3)]
    labels = [(1, 1, 1), (1, 0, 1), (0, 0, None), (1, 0, 0), (2, 2, 1)]
    for item, answers in zip(items, labels, strict=True):
        for person, label in zip(people, answers, strict=True):
            if label is not None:
                add_label_judgment(item, person, label=label)
    void_judgment(Judgment.objects.get(item=items[4], annotator=people[2]), by=None, reason="slip")
    from_judgments = disputed_ids(quality._disputed_by_judgments(study))
    assert from_judgments == {items[1].pk, items[3].pk}
    assert disputed_ids(quality._disputed(study)) == from_judgments
    block_annotator(study, people[1], by=None, reason="rushing", exclude_judgments=True)  # their answers leave
    assert disputed_ids(quality._disputed(study)) == disputed_ids(quality._disputed_by_judgments(study))
    assert disputed_ids(quality._disputed(study)) == {items[3].pk}
