"""Sending an item back for rework: its judgments are kept (voided, no longer counted), its slots
freed for a fresh round by other annotators, its decision withdrawn and recorded; no judgment
is lost or written twice, however the send-back races with others. Runs on the configured
database (SQLite by default, Postgres when DATABASE_URL points at one)."""

import threading
from collections import Counter

import pytest
from django.db import connection

from annotation.models import (
    Adjudication,
    AdjudicationQueueEntry,
    Assignment,
    Judgment,
    Rework,
)
from annotation.provenance import item_labels
from annotation.selectors import counted_judgments
from annotation.services import claim_next_item, submit_judgment
from annotation.services.adjudication import (
    SENT_BACK_PREFIX,
    current_queue,
    decide,
    next_undecided,
    send_back,
)
from retrieval.errors import InputError
from tests.factories import make_annotator, make_relic_proxy_study, make_user


def judge_through_the_queue(study, people, positions):
    """Each person claims their next item and answers `positions[n]`."""
    judged = []
    for person, position in zip(people, positions):
        assignment = claim_next_item(study, person)
        judged.append(submit_judgment(annotator=person, item=assignment.item, position=position).judgment)
    return judged


def snapshot() -> list[tuple]:
    """Every judgment as stored, answer and all: compare to prove none changed or vanished."""
    return sorted(Judgment.objects.values_list("pk", "item_id", "annotator_id", "choice_id", "seconds", "submitted_at"))


@pytest.mark.django_db
def test_a_sent_back_item_keeps_its_judgments_and_gets_a_fresh_round_from_others():
    study = make_relic_proxy_study(1, judgments_per_item=3)
    item = study.items.get()
    first_round = [make_annotator() for _ in range(3)]
    judged = judge_through_the_queue(study, first_round, [0, 1, 2])
    staff = make_user(staff=True)
    decide(item, by=staff, position=0, reason="Annotator error", note="first look")
    before = snapshot()

    rework = send_back(item, by=staff, reason="Guideline gap", note="section 3 unclear")

    assert snapshot() == before  # nothing deleted, no answer changed
    voided = Judgment.objects.filter(pk__in=[judgment.pk for judgment in judged])
    assert all(judgment.voided for judgment in voided)
    assert {judgment.void_reason for judgment in voided} == {f"{SENT_BACK_PREFIX}: Guideline gap (section 3 unclear)"}
    assert sorted(rework.judgments) == sorted(judgment.pk for judgment in judged)
    assert rework.withdrawn_decision["position"] == 0 and rework.withdrawn_decision["reason"] == "Annotator error"
    assert not Adjudication.objects.filter(item=item).exists()
    assert not counted_judgments(study).exists()
    assert set(Assignment.objects.filter(item=item).values_list("state", flat=True)) == {Assignment.State.VOIDED}
    assert item_labels(study, [item.pk])[item.pk].source == "sent_back"

    # The first round's annotators are never served it again; others fill three fresh slots.
    assert all(claim_next_item(study, person) is None for person in first_round)
    second_round = [make_annotator() for _ in range(4)]
    judge_through_the_queue(study, second_round[:3], [1, 1, 2])
    assert claim_next_item(study, second_round[3]) is None  # full again
    assert Judgment.objects.filter(item=item).count() == 6
    assert max(Counter(Judgment.objects.values_list("item_id", "annotator_id")).values()) == 1
    assert counted_judgments(study).count() == 3

    # Back in the adjudication queue, marked as back from rework.
    current_queue(study)
    entry = AdjudicationQueueEntry.objects.get(item=item)
    assert entry.reworked and entry.judgments == 3 and next_undecided(study) == item.pk
    label = item_labels(study, [item.pk])[item.pk]
    assert (label.source, label.label, label.reworks) == ("aggregated", 1, 1)


@pytest.mark.django_db
def test_an_item_without_judgments_left_is_not_sent_back_and_nothing_is_written():
    study = make_relic_proxy_study(1)
    item = study.items.get()
    staff = make_user(staff=True)
    with pytest.raises(InputError) as refused:
        send_back(item, by=staff, reason="Broken item")
    assert refused.value.field == "item" and not Rework.objects.exists()
    with pytest.raises(InputError) as unlisted:
        send_back(item, by=staff, reason="Because")
    assert unlisted.value.field == "reason"


@pytest.mark.django_db
def test_sending_back_keeps_the_stored_queue_without_a_rebuild():
    study = make_relic_proxy_study(3)
    people = [make_annotator() for _ in range(3)]
    for positions in ([0, 1, 2], [0, 0, 1], [1, 2, 2]):
        judge_through_the_queue(study, people, positions)
    queue = current_queue(study)
    first = next_undecided(study)
    send_back(study.items.get(pk=first), by=make_user(staff=True), reason="Ambiguous item")
    assert current_queue(study).built_at == queue.built_at
    assert not AdjudicationQueueEntry.objects.filter(item_id=first).exists()
    assert AdjudicationQueueEntry.objects.filter(study=study).count() == 2


@pytest.mark.django_db(transaction=True)
def test_racing_send_backs_and_decisions_void_each_judgment_once_and_lose_none():
    study = make_relic_proxy_study(1, judgments_per_item=3)
    item = study.items.get()
    judge_through_the_queue(study, [make_annotator() for _ in range(3)], [0, 1, 2])
    staff = [make_user(staff=True) for _ in range(4)]
    before = snapshot()
    outcomes, errors = [], []

    def act(person, n):
        try:
            if n % 2:
                decide(item, by=person, position=n % 3, reason="Annotator error")
                outcomes.append("decided")
            else:
                send_back(item, by=person, reason="Guideline gap")
                outcomes.append("sent back")
        except InputError as refusal:
            outcomes.append(refusal.field)
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=act, args=(person, n)) for n, person in enumerate(staff)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert snapshot() == before
    assert Rework.objects.count() == 1 and outcomes.count("sent back") == 1 and outcomes.count("item") == 1
    assert sorted(Rework.objects.get().judgments) == [pk for pk, *_ in before]
    assert Judgment.objects.filter(voided=True).count() == 3
