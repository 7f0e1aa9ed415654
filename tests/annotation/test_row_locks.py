"""Row locks (annotation.services.locks.lock_rows) and the bulk writes that take them, against the
test database in real threads, each with its own connection (SQLite by default, Postgres when
DATABASE_URL points at one). On Postgres lock_rows locks every row of its queryset in id order, so
two bulk send-backs or voids over overlapping items wait for each other instead of deadlocking,
and the one that waits reads the other's voids before writing its own; SQLite's IMMEDIATE
transactions serialise the same writers whole."""

import threading

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from annotation.models import Item, Judgment, Rework, Study
from annotation.services.adjudication import SENT_BACK_PREFIX, send_items_back
from annotation.services.locks import lock_rows
from annotation.services.rework import void_judgments
from tests.annotation.test_live_counts import assert_counts_hold
from tests.annotation.test_rework import assert_every_slot_filled_once, racing_annotator, racing_study
from tests.factories import make_relic_proxy_study, make_user

BULK_VOID_REASON = "bulk void"


def lockable_from_elsewhere(item_ids: list[int]) -> list[int]:
    """Which of the items another connection can lock right now without waiting (NOWAIT)."""
    free = []

    def probe():
        try:
            for item_id in item_ids:
                try:
                    with transaction.atomic():
                        list(Item.objects.select_for_update(nowait=True).filter(pk=item_id).values_list("pk"))
                    free.append(item_id)
                except DatabaseError:  # held by the other transaction
                    pass
        finally:
            connection.close()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return free


@pytest.mark.django_db(transaction=True)
def test_lock_rows_holds_every_row_of_its_queryset_in_id_order_until_the_transaction_ends():
    study = make_relic_proxy_study(4)
    item_ids = sorted(study.items.values_list("pk", flat=True))
    with transaction.atomic():
        with CaptureQueriesContext(connection) as statements:
            lock_rows(study.items.order_by("-position"))  # the caller's order does not matter
        if connection.features.has_select_for_update:
            (sql,) = [query["sql"] for query in statements.captured_queries]
            # One statement, ordered by id, no LIMIT, locking the items' own table only.
            assert "ORDER BY" in sql and "LIMIT" not in sql and sql.endswith('FOR NO KEY UPDATE OF "annotation_item"')
            assert lockable_from_elsewhere(item_ids) == []  # all four held, not only the first
        else:  # SQLite: no row locks; the IMMEDIATE transaction already holds the database
            assert statements.captured_queries == []
    if connection.features.has_select_for_update:
        assert lockable_from_elsewhere(item_ids) == item_ids  # released at commit


def bulk_writer(study, staff, errors, start, rounds, chosen, void):
    """One staffer's bulk actions over `chosen` item positions, `rounds` times: a send-back (the
    shared send_items_back, as the workspace and the data manager call it, but without the data
    manager's study lock, so the item locks alone keep order) and, when `void`, a bulk void."""
    try:
        start.wait()
        for turn in range(rounds):
            items = Item.objects.filter(study=study, position__in=chosen)
            if void and turn % 2 == 0:
                void_judgments(study, items, by=staff, reason=BULK_VOID_REASON)
            else:
                with transaction.atomic():
                    send_items_back(study, items, by=staff, reason=f"round {turn}")
    except Exception as exc:  # a deadlock shows here: Postgres aborts one of the two
        errors.append(exc)
    finally:
        connection.close()


def filling_annotator(study, annotator, errors, start, rounds):
    start.wait()
    racing_annotator(study, annotator, errors, rounds)


@pytest.mark.django_db(transaction=True)
def test_overlapping_bulk_send_backs_and_voids_racing_annotators_neither_lose_nor_duplicate_judgments():
    # An annotator judges an item once, voided or not: with one judgment per item and at most six
    # bulk actions (three rounds each) voiding it, seven annotators can always fill it again.
    items, per_item, rounds = 8, 1, 3
    study, staff, annotators = racing_study(items, per_item, 2 * rounds + 2)
    for annotator in annotators:  # every item judged before the first send-back
        racing_annotator(study, annotator, [], 3 * items)
    errors, start = [], threading.Barrier(2 + len(annotators))
    writers = [
        # Overlapping selections, one of them with more items: each locks its whole selection.
        threading.Thread(target=bulk_writer, args=(study, staff, errors, start, rounds, range(0, 6), False)),
        threading.Thread(target=bulk_writer, args=(study, staff, errors, start, rounds, range(2, 8), True)),
    ]
    fillers = [
        threading.Thread(target=filling_annotator, args=(study, annotator, errors, start, 3 * items))
        for annotator in annotators
    ]
    for thread in [*writers, *fillers]:
        thread.start()
    for thread in [*writers, *fillers]:
        thread.join()
    for annotator in annotators:  # what the last send-backs opened, the idle annotators fill now
        racing_annotator(study, annotator, errors, 3 * items)

    assert errors == []
    assert Rework.objects.exists() and Judgment.objects.filter(void_reason=BULK_VOID_REASON).exists()
    assert_every_slot_filled_once(study, items, per_item)
    voided = Judgment.objects.filter(voided=True)
    recorded = [judgment for judgments in Rework.objects.values_list("judgments", flat=True) for judgment in judgments]
    sent_back = voided.filter(void_reason__startswith=SENT_BACK_PREFIX)
    assert sorted(recorded) == sorted(sent_back.values_list("pk", flat=True))  # each under exactly one Rework
    assert set(voided.values_list("void_reason", flat=True)) - set(sent_back.values_list("void_reason", flat=True)) == {
        BULK_VOID_REASON
    }
    assert_counts_hold(study)


@pytest.mark.django_db(transaction=True)
def test_a_judgment_commits_while_a_staffer_holds_its_study_and_waits_for_its_item():
    """The deadlock of FOR UPDATE: an annotator holds their item and commits a judgment, whose
    study foreign key Postgres checks at COMMIT with a key-share lock on the study; a staffer
    holds that study (a bulk action's lock) and waits for the item. With FOR NO KEY UPDATE the
    commit goes through while the staffer still holds the study, and the staffer then gets the
    item."""
    if not connection.features.has_select_for_update:
        pytest.skip("SQLite has no row locks: its IMMEDIATE transactions run the two one after the other")
    study = make_relic_proxy_study(1)
    item = study.items.get()
    annotator = make_user("annotator")
    study_held, judged = threading.Event(), threading.Event()
    outcome: dict = {}

    def staffer():
        try:
            with transaction.atomic():
                lock_rows(Study.objects.filter(pk=study.pk))
                study_held.set()
                outcome["judgment committed while the study was held"] = judged.wait(10)
                lock_rows(Item.objects.filter(pk=item.pk))
        except DatabaseError as error:
            outcome["staffer"] = error
        finally:
            connection.close()

    def annotator_submits():
        try:
            with transaction.atomic():
                lock_rows(Item.objects.filter(pk=item.pk))  # as a submission does
                study_held.wait(10)
                Judgment.objects.create(item=item, annotator=annotator, choice=item.candidates.first(), seconds=3.0)
            judged.set()
        except DatabaseError as error:
            outcome["annotator"] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=staffer), threading.Thread(target=annotator_submits)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcome == {"judgment committed while the study was held": True}
    assert Judgment.objects.filter(item=item, study=study).count() == 1
