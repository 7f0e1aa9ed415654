"""Staff's bulk actions on judgments (annotation.services.rework), through the data manager's
REST and page: voiding many judgments and sending items back to the queue keep every judgment
(voided, with who, when and why), free exactly the slots they held, never hand an item back to
someone who judged it, and export the selection in the judgment export's shape. The threaded
test holds send-backs racing annotators to the invariants test_concurrency.py holds the queue to."""

import csv
import io
import json
import threading
from collections import Counter

import pytest
from django.db import connection

from annotation.exports import judgment_export
from annotation.models import (
    Adjudication,
    AdjudicationQueue,
    AdjudicationQueueEntry,
    Assignment,
    Item,
    Judgment,
    Rework,
)
from annotation.provenance import item_labels
from annotation.services import adjudication, claim_next_item, submit_judgment, void_judgment
from annotation.services.adjudication import SENT_BACK_PREFIX, current_queue, decide
from annotation.services.annotator_actions import undo_last_submission
from annotation.services.rework import MAX_SEND_BACK_REASON, send_back, void_judgments
from evaluation.label_aggregation import label_sources_section
from retrieval.errors import InputError
from tests.annotation.test_attacks import session_client
from tests.annotation.test_live_counts import assert_counts_hold
from tests.factories import api_client, make_annotator, make_bulk_proxy_study, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db


def judged_study(items: int = 4, people: int = 3, prefix: str = "ann"):
    """A proxy study whose items were all judged through the queue (claims, slots) by `people`
    annotators named prefix0, prefix1, ..."""
    study = make_relic_proxy_study(items, judgments_per_item=people)
    annotators = [make_annotator(f"{prefix}{n}") for n in range(people)]
    for annotator in annotators:
        while (claim := claim_next_item(study, annotator)) is not None:
            submit_judgment(annotator=annotator, item=claim.item, position=annotator.pk % 3, seconds=4)
    return study, annotators


def live_slots(item: Item) -> int:
    return Assignment.objects.filter(item=item, state__in=("active", "submitted")).count()


def test_voiding_the_chosen_items_keeps_their_judgments_and_frees_their_slots():
    study, _ = judged_study()
    staff = make_user("curator", staff=True)
    chosen = list(study.items.order_by("position")[:2])
    response = api_client(staff).post(
        f"/api/studies/{study.pk}/data/void/",
        {"items": [item.pk for item in chosen], "reason": "pilot batch"},
        format="json",
    )
    assert response.json() == {"action": "void", "items": 2, "voided": 6, "withdrawn_decisions": 0}
    assert Judgment.objects.count() == 12  # nothing deleted
    voided = Judgment.objects.filter(voided=True)
    assert set(voided.values_list("item_id", flat=True)) == {item.pk for item in chosen}
    assert set(voided.values_list("void_reason", "voided_by__username")) == {("pilot batch", "curator")}
    assert all(live_slots(item) == 0 for item in chosen)
    assert set(Assignment.objects.filter(judgment__voided=True).values_list("state", flat=True)) == {"voided"}
    # The items are back in the queue for someone new, never for those who judged them.
    newcomer = make_annotator("newcomer")
    assert claim_next_item(study, newcomer).item in chosen
    assert claim_next_item(study, Judgment.objects.filter(item=chosen[0]).first().annotator) is None


def test_voiding_all_matching_the_annotator_filter_voids_only_that_annotators_judgments():
    study, annotators = judged_study()
    staff = make_user(staff=True)
    response = api_client(staff).post(
        f"/api/studies/{study.pk}/data/void/",
        {"scope": "matching", "annotator": "ann1", "reason": "clicked through"},
        format="json",
    )
    assert response.json()["voided"] == 4
    assert set(Judgment.objects.filter(voided=True).values_list("annotator__username", flat=True)) == {"ann1"}
    # Voiding again changes nothing: a voided judgment keeps its first reason.
    again = void_judgments(study, study.items.all(), by=staff, reason="again", annotator=annotators[1])
    assert again.voided == 0
    assert set(Judgment.objects.filter(voided=True).values_list("void_reason", flat=True)) == {"clicked through"}


def test_sending_an_item_back_records_its_rework_as_the_workspace_does_and_reopens_every_slot():
    study, annotators = judged_study(items=3)
    staff = make_user("curator", staff=True)
    item = study.items.order_by("position").first()
    response = session_client(staff).post(
        f"/studies/{study.pk}/data/bulk/",
        {"action": "send_back", "items": [item.pk], "reason": "the context was cut", "next": "/studies/"},
    )
    assert response.status_code == 302 and response["Location"] == "/studies/"
    rework = Rework.objects.get()
    sent = Judgment.objects.filter(item=item)
    assert (rework.item, rework.reason, rework.note, rework.sent_by, rework.withdrawn_decision) == (
        item,
        "the context was cut",
        "",
        staff,
        None,
    )
    assert rework.judgments == sorted(sent.values_list("pk", flat=True))
    assert set(sent.values_list("voided", "void_reason")) == {(True, f"{SENT_BACK_PREFIX}: the context was cut")}
    assert live_slots(item) == 0
    # Three annotators who never judged it fill it again; none of the first three is served it.
    for annotator in annotators:
        assert claim_next_item(study, annotator) is None
    for n in range(3):
        fresh = make_annotator(f"fresh{n}")
        claim = claim_next_item(study, fresh)
        assert claim.item == item
        submit_judgment(annotator=fresh, item=item, position=0)
    assert Judgment.objects.filter(item=item).count() == 6 and live_slots(item) == 3
    detail = api_client(staff).get(f"/api/studies/{study.pk}/data/items/{item.pk}/").json()
    assert [entry["rework"] for entry in detail["judgments"]] == [rework.pk] * 3 + [None] * 3


def test_sending_back_items_without_live_judgments_records_nothing():
    study, _ = judged_study(items=2)
    staff = make_user(staff=True)
    item = study.items.first()
    void_judgments(study, study.items.filter(pk=item.pk), by=staff, reason="bad")
    assert send_back(study, study.items.filter(pk=item.pk), by=staff, reason="again").summary() == {
        "items": 0,
        "voided": 0,
        "withdrawn_decisions": 0,
    }
    assert not Rework.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"items": [1], "reason": ""}, "reason"),
        ({"items": [1], "reason": "   "}, "reason"),
        ({"items": [1], "reason": "x" * 2001}, "reason"),
        ({"items": [], "reason": "why"}, "items"),
        ({"reason": "why"}, "items"),
        ({"items": ["1; drop"], "reason": "why"}, "items"),
        ({"items": list(range(1, 1002)), "reason": "why"}, "items"),
        ({"scope": "everything", "reason": "why"}, "scope"),
        ({"scope": "matching", "status": "finished", "reason": "why"}, "status"),
    ],
)
def test_a_bad_bulk_request_is_a_400_naming_the_field_and_changes_nothing(body, field):
    study, _ = judged_study(items=1)
    body = {**body, "items": body["items"]} if "items" in body else body
    if body.get("items") == [1]:
        body["items"] = [study.items.get().pk]
    before = sorted(Judgment.objects.values_list("pk", "voided"))
    for action in ("void", "send-back"):
        response = api_client(make_user(staff=True)).post(
            f"/api/studies/{study.pk}/data/{action}/", body, format="json"
        )
        assert response.status_code == 400 and field in response.json(), (action, response.json())
    assert sorted(Judgment.objects.values_list("pk", "voided")) == before
    assert not Rework.objects.exists()


def test_items_of_another_study_are_never_touched_by_a_bulk_action():
    mine, _ = judged_study(items=1)
    theirs, _ = judged_study(items=1, prefix="other")
    staff = make_user(staff=True)
    foreign = theirs.items.get().pk
    response = api_client(staff).post(
        f"/api/studies/{mine.pk}/data/send-back/", {"items": [foreign], "reason": "x"}, format="json"
    )
    assert response.json()["items"] == 0 and not Judgment.objects.filter(voided=True).exists()


def test_a_judgment_voided_by_a_bulk_action_can_no_longer_be_undone():
    study = make_relic_proxy_study(1, judgments_per_item=1)
    annotator = make_annotator()
    submit_judgment(annotator=annotator, item=claim_next_item(study, annotator).item, position=0)
    void_judgments(study, study.items.all(), by=make_user(staff=True), reason="spam")
    with pytest.raises(Exception, match="someone else has already seen"):
        undo_last_submission(study, annotator)
    assert Judgment.objects.count() == 1


def test_exporting_the_selection_writes_the_judgment_exports_rows_of_those_items_only():
    study, _ = judged_study(items=4)
    staff = make_user(staff=True)
    chosen = list(study.items.order_by("position")[1:3])
    full = [json.loads(line) for line in "".join(judgment_export(study, "jsonl")).splitlines()]
    expected = [row for row in full if row["item"] in {item.pk for item in chosen}]
    ids = ",".join(str(item.pk) for item in chosen)
    client = api_client(staff)
    jsonl = client.get(f"/api/studies/{study.pk}/data/export/", {"format": "jsonl", "items": ids})
    assert jsonl["Content-Type"].startswith("application/x-ndjson")
    assert [json.loads(line) for line in b"".join(jsonl.streaming_content).decode().splitlines()] == expected
    as_json = client.get(f"/api/studies/{study.pk}/data/export/", {"format": "json", "items": ids})
    assert json.loads(b"".join(as_json.streaming_content)) == expected
    as_csv = client.get(f"/api/studies/{study.pk}/data/export/", {"format": "csv", "items": ids})
    rows = list(csv.DictReader(io.StringIO(b"".join(as_csv.streaming_content).decode())))
    assert [int(row["judgment"]) for row in rows] == [row["judgment"] for row in expected]
    # All matching the filter, through the page's form: every judgment of those items.
    Judgment.objects.filter(item=chosen[0], annotator__username="ann0").delete()
    page = session_client(staff).post(
        f"/studies/{study.pk}/data/export/", {"format": "jsonl", "scope": "matching", "annotator": "ann0"}
    )
    lines = [json.loads(line) for line in b"".join(page.streaming_content).decode().splitlines()]
    assert {row["item"] for row in lines} == {item.pk for item in study.items.exclude(pk=chosen[0].pk)}
    assert len(lines) == 9
    assert 'filename="study-' in page["Content-Disposition"]
    assert client.get(f"/api/studies/{study.pk}/data/export/", {"format": "xml", "items": ids}).status_code == 400


def test_a_void_reason_is_required_on_the_detail_page_too():
    study, _ = judged_study(items=1)
    staff = make_user(staff=True)
    judgment = Judgment.objects.first()
    url = f"/studies/{study.pk}/data/items/{judgment.item_id}/judgments/{judgment.pk}/void/"
    page = session_client(staff).post(url, {"reason": ""}, follow=True)
    assert "was not voided: a reason is required" in page.content.decode()
    session_client(staff).post(url, {"reason": "duplicate account"})
    judgment.refresh_from_db()
    assert judgment.voided and judgment.void_reason == "duplicate account"


def racing_annotator(study, annotator, errors, rounds):
    """Claim and answer (twice, a double click) until nothing is left; every third answer is
    taken back and given again."""
    try:
        for turn in range(rounds):
            claim = claim_next_item(study, annotator)
            if claim is None:
                return
            for _ in range(2):
                submit_judgment(annotator=annotator, item=claim.item, position=turn % 3, seconds=1)
            if turn % 3 == 2:
                try:
                    undo_last_submission(study, annotator)
                except Exception as refusal:  # voided meanwhile: the answer stands, voided
                    if "seen" not in str(refusal):
                        raise
                    continue
                submit_judgment(annotator=annotator, item=claim.item, position=0, seconds=1)
    except Exception as exc:
        errors.append(exc)
    finally:
        connection.close()


def sending_back(study, staff, errors, stop):
    """Staff send the first items back while annotators work, as long as anything is live."""
    try:
        for position in range(3):
            while not stop.is_set():
                item = study.items.get(position=position)
                if Judgment.objects.filter(item=item, voided=False).exists():
                    send_back(study, study.items.filter(pk=item.pk), by=staff, reason=f"round {position}")
                    break
    except Exception as exc:
        errors.append(exc)
    finally:
        connection.close()


def racing_study(items: int, per_item: int, people: int):
    """A proxy study, a staffer and `people` annotators, for the racing tests."""
    study = make_relic_proxy_study(items, judgments_per_item=per_item)
    return study, make_user(staff=True), [make_annotator(f"racer{n}") for n in range(people)]


def assert_every_slot_filled_once(study, items: int, per_item: int) -> None:
    """After a race settled: every item has its live judgments, nobody judged an item twice, no
    claim is left open, and every voided judgment's claim reads voided."""
    live = Counter(Judgment.objects.filter(voided=False).values_list("item_id", flat=True))
    assert live == {item.pk: per_item for item in study.items.all()}
    assert max(Counter(Judgment.objects.values_list("item_id", "annotator_id")).values()) == 1
    assert not Assignment.objects.filter(state=Assignment.State.ACTIVE).exists()
    assert Assignment.objects.filter(state=Assignment.State.SUBMITTED).count() == items * per_item
    voided = Judgment.objects.filter(voided=True)
    assert set(Assignment.objects.filter(judgment__in=voided).values_list("state", flat=True)) <= {"voided"}


@pytest.mark.django_db(transaction=True)
def test_send_backs_racing_annotators_neither_lose_nor_duplicate_judgments():
    items, per_item = 6, 2
    study, staff, annotators = racing_study(items, per_item, 6)
    errors, stop = [], threading.Event()
    workers = [threading.Thread(target=racing_annotator, args=(study, a, errors, 3 * items)) for a in annotators]
    staffer = threading.Thread(target=sending_back, args=(study, staff, errors, stop))
    for thread in [*workers, staffer]:
        thread.start()
    for thread in workers:
        thread.join()
    stop.set()
    staffer.join()
    # Whatever a send-back left open after everyone stopped, the idle annotators fill now.
    for annotator in annotators:
        racing_annotator(study, annotator, errors, 3 * items)

    assert errors == []
    assert_every_slot_filled_once(study, items, per_item)
    voided = Judgment.objects.filter(voided=True)
    recorded = [judgment for judgments in Rework.objects.values_list("judgments", flat=True) for judgment in judgments]
    assert sorted(recorded) == sorted(voided.values_list("pk", flat=True))  # each voided under exactly one
    assert_counts_hold(study)  # the items' stored live counts, recounted by every racing writer


def test_bulk_void_matches_void_judgment_one_by_one():
    """The bulk path writes what the one-judgment path writes (same states, same fields)."""
    one, _ = judged_study(items=1, prefix="one")
    many, _ = judged_study(items=1, prefix="many")
    staff = make_user(staff=True)
    for judgment in Judgment.objects.filter(item__study=one):
        void_judgment(judgment, by=staff, reason="same")
    void_judgments(many, many.items.all(), by=staff, reason="same")

    def written(study):
        judgments = Judgment.objects.filter(item__study=study).order_by("assignment__slot")
        return [
            (j.voided, j.void_reason, j.voided_by_id, j.voided_at is not None, j.assignment.state) for j in judgments
        ]

    assert written(one) == written(many)


def test_a_reason_with_a_nul_character_is_refused():
    study, _ = judged_study(items=1)
    with pytest.raises(InputError, match="NUL"):
        send_back(study, study.items.all(), by=None, reason="bad\x00")


def test_a_send_back_longer_than_a_rework_keeps_is_refused_naming_the_reason():
    study, _ = judged_study(items=1)
    response = api_client(make_user(staff=True)).post(
        f"/api/studies/{study.pk}/data/send-back/",
        {"items": [study.items.get().pk], "reason": "x" * (MAX_SEND_BACK_REASON + 1)},
        format="json",
    )
    assert response.status_code == 400 and "reason" in response.json()
    assert not Judgment.objects.filter(voided=True).exists() and not Rework.objects.exists()


def test_a_bulk_send_back_withdraws_decisions_and_queue_entries_as_the_workspace_does():
    """Two items each way, the first of each pair decided: the data manager's bulk send-back and
    the workspace's one-item send-back leave the same records behind."""
    study, _ = judged_study(items=4)
    staff = make_user("curator", staff=True)
    first, second, third, fourth = study.items.order_by("position")
    for item in (first, third):
        decide(item, by=staff, position=0, reason="Annotator error", note="checked")
    current_queue(study)
    assert AdjudicationQueueEntry.objects.filter(study=study).count() == 4  # three annotators, three answers
    for item in (first, second):
        adjudication.send_back(item, by=staff, reason="Guideline gap")
    result = send_back(study, study.items.filter(pk__in=[third.pk, fourth.pk]), by=staff, reason="Guideline gap")
    assert result.summary() == {"items": 2, "voided": 6, "withdrawn_decisions": 1}

    def recorded(item):
        rework = Rework.objects.get(item=item)
        decision = rework.withdrawn_decision and {
            key: value for key, value in rework.withdrawn_decision.items() if key not in ("candidate", "decided_at")
        }
        voided = Judgment.objects.filter(item=item)
        return (
            rework.reason,
            rework.note,
            rework.sent_by,
            len(rework.judgments),
            rework.judgments == sorted(voided.values_list("pk", flat=True)),
            decision,
            set(voided.values_list("voided", "void_reason")),
            set(Assignment.objects.filter(item=item).values_list("state", flat=True)),
            Adjudication.objects.filter(item=item).exists(),
            AdjudicationQueueEntry.objects.filter(item=item).exists(),
        )

    assert recorded(first) == recorded(third) and recorded(second) == recorded(fourth)
    assert recorded(third)[5]["reason"] == "Annotator error" and recorded(fourth)[5] is None
    # The stored queue still holds, without the four items, and a rebuild agrees.
    queue = AdjudicationQueue.objects.get(study=study)
    assert not queue.stale and not AdjudicationQueueEntry.objects.filter(study=study).exists()
    assert current_queue(study).pk == queue.pk and not AdjudicationQueueEntry.objects.filter(study=study).exists()


def test_an_item_sent_back_from_the_data_manager_reads_as_sent_back_in_label_provenance():
    """Label provenance (the exports' item_label, label_source, label_method, reworks, the study
    report's label sources) reads an item sent back from the data manager's table exactly as one
    sent back from the adjudication workspace: `sent_back` with no label while no counted
    judgment is in, one rework each, and the same after a fresh round."""
    study, _ = judged_study(items=2)
    staff = make_user(staff=True)
    workspace_item, manager_item = study.items.order_by("position")
    api_client(staff).post(
        f"/api/studies/{study.pk}/adjudication/items/{workspace_item.pk}/send-back/",
        {"reason": "Ambiguous item"},
        format="json",
    )
    response = api_client(staff).post(
        f"/api/studies/{study.pk}/data/send-back/",
        {"items": [manager_item.pk], "reason": "Ambiguous item"},
        format="json",
    )
    assert response.json()["items"] == 1 and Rework.objects.count() == 2

    def provenance():
        rows = [json.loads(line) for line in "".join(judgment_export(study, "jsonl")).splitlines()]
        by_item = {
            row["item"]: (
                row["item_label"],
                row["label_source"],
                row["label_method"],
                row["reworks"],
                row["void_reason"],
            )
            for row in rows
        }
        labels = item_labels(study, [workspace_item.pk, manager_item.pk])
        return by_item, labels

    by_item, labels = provenance()
    assert (
        by_item[workspace_item.pk]
        == by_item[manager_item.pk]
        == (
            None,
            "sent_back",
            None,
            1,
            f"{SENT_BACK_PREFIX}: Ambiguous item",
        )
    )
    assert labels[workspace_item.pk] == labels[manager_item.pk]
    assert label_sources_section(study)["items"]["sent_back"] == 2
    # A fresh round on each: both aggregate the new answers and still count one rework.
    for n in range(3):
        fresh = make_annotator(f"fresh{n}")
        while (claim := claim_next_item(study, fresh)) is not None:
            submit_judgment(annotator=fresh, item=claim.item, position=1)
    _, labels = provenance()
    assert labels[workspace_item.pk] == labels[manager_item.pk]
    assert (labels[manager_item.pk].source, labels[manager_item.pk].reworks) == ("unanimous", 1)


def test_sending_back_every_item_of_a_study_past_sqlites_parameter_limit_takes_one_request():
    """scope=matching over 1,500 items (SQLite refuses a statement with more than about a
    thousand parameters): one Rework per item, every judgment voided, nothing else touched."""
    study = make_bulk_proxy_study(1500, judgments_per_item=2)
    other = make_bulk_proxy_study(3, judgments_per_item=2, seed=1)
    staff = make_user(staff=True)
    for item in study.items.order_by("position")[:1200:100]:
        decide(item, by=staff, position=0, reason="Annotator error")
    response = api_client(staff).post(
        f"/api/studies/{study.pk}/data/send-back/", {"scope": "matching", "reason": "new guidelines"}, format="json"
    )
    assert response.json() == {"action": "send_back", "items": 1500, "voided": 3000, "withdrawn_decisions": 12}
    assert Rework.objects.filter(item__study=study).count() == 1500 and not Adjudication.objects.exists()
    assert not Judgment.objects.filter(item__study=study, voided=False).exists()
    assert not Judgment.objects.filter(item__study=other, voided=True).exists()
    assert sorted(j for js in Rework.objects.values_list("judgments", flat=True) for j in js) == sorted(
        Judgment.objects.filter(item__study=study).values_list("pk", flat=True)
    )
