"""Five annotators racing through one study in threads, each with its own database connection:
afterwards no item has more judgments than it needs and nobody judged an item twice. Runs on
the configured database: SQLite by default (writers serialised), Postgres when DATABASE_URL
points at one (row locks and the partial unique constraints do the work)."""

import threading
import time
from collections import Counter

import pytest
from django.db import connection

from annotation.models import Assignment, Judgment
from annotation.services import claim_next_item, submit_judgment
from annotation.services.annotator_actions import skip_item, undo_last_submission
from tests.annotation.test_live_counts import assert_counts_hold
from tests.factories import make_annotator, make_relic_proxy_study

ANNOTATORS = 5
ITEMS = 8
JUDGMENTS_PER_ITEM = 3


def work_through(study, annotator, errors):
    """Claim and answer until the queue has nothing more for this annotator; every answer is
    submitted twice, like an impatient double click."""
    try:
        for _ in range(ITEMS + 1):
            assignment = claim_next_item(study, annotator)
            if assignment is None:
                return
            for _ in range(2):
                submit_judgment(annotator=annotator, item=assignment.item, position=annotator.pk % 3, seconds=1)
    except Exception as exc:
        errors.append(exc)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_racing_annotators_never_overfill_an_item_or_judge_twice():
    study = make_relic_proxy_study(ITEMS, judgments_per_item=JUDGMENTS_PER_ITEM)
    annotators = [make_annotator(f"racer{n}") for n in range(ANNOTATORS)]
    errors: list[Exception] = []
    threads = [threading.Thread(target=work_through, args=(study, a, errors)) for a in annotators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    per_item = Counter(Judgment.objects.values_list("item_id", flat=True))
    assert per_item == {item.pk: JUDGMENTS_PER_ITEM for item in study.items.all()}
    pairs = Counter(Judgment.objects.values_list("item_id", "annotator_id"))
    assert max(pairs.values()) == 1
    assert not Assignment.objects.filter(state=Assignment.State.ACTIVE).exists()
    assert Assignment.objects.filter(state=Assignment.State.SUBMITTED).count() == ITEMS * JUDGMENTS_PER_ITEM
    assert_counts_hold(study)


@pytest.mark.django_db(transaction=True)
def test_simultaneous_double_submissions_store_one_judgment():
    study = make_relic_proxy_study(1)
    annotator = make_annotator()
    item = claim_next_item(study, annotator).item
    stored, errors = [], []

    def submit(position):
        try:
            stored.append(submit_judgment(annotator=annotator, item=item, position=position).judgment.pk)
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(n % 3,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(set(stored)) == 1 and Judgment.objects.count() == 1


def claim_or_wait(study, annotator, patience: float = 60.0):
    """The annotator's next claim. While the queue is empty for them but others still hold
    claims, they come back a moment later, as a person would: a skip frees its slot, and an
    annotator who gave up at the empty moment before would leave it unfilled (a loaded machine
    once let every other annotator finish while a skipper still held its first item)."""
    deadline = time.monotonic() + patience
    while True:
        assignment = claim_next_item(study, annotator)
        others_hold = (
            Assignment.objects.filter(item__study=study, state=Assignment.State.ACTIVE)
            .exclude(annotator=annotator)
            .exists()
        )
        if assignment is not None or not others_hold or time.monotonic() > deadline:
            return assignment
        time.sleep(0.05)


def work_with_second_thoughts(study, annotator, skips: bool, errors, skipped_items):
    """Like work_through, but the annotator skips the first item they get (when `skips`) and
    takes back every other answer right after a double submission, then answers it again."""
    try:
        for turn in range(2 * ITEMS + 2):
            assignment = claim_or_wait(study, annotator)
            if assignment is None:
                return
            if skips and turn == 0:
                skip_item(assignment.item, annotator)
                skipped_items.append((assignment.item.pk, annotator.pk))
                continue
            for _ in range(2):
                submit_judgment(annotator=annotator, item=assignment.item, position=0, seconds=1)
            if turn % 2:
                assert undo_last_submission(study, annotator) == assignment.item
                for _ in range(2):
                    submit_judgment(annotator=annotator, item=assignment.item, position=1, seconds=1)
    except Exception as exc:
        errors.append(exc)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_skips_and_undos_among_racing_annotators_neither_lose_nor_duplicate_judgments():
    study = make_relic_proxy_study(ITEMS, judgments_per_item=JUDGMENTS_PER_ITEM)
    annotators = [make_annotator(f"doubter{n}") for n in range(ANNOTATORS)]
    errors: list[Exception] = []
    skipped_items: list[tuple[int, int]] = []  # a skipper whose first claim lost every race skips nothing
    threads = [
        threading.Thread(target=work_with_second_thoughts, args=(study, a, n < 2, errors, skipped_items))
        for n, a in enumerate(annotators)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    per_item = Counter(Judgment.objects.values_list("item_id", flat=True))
    assert per_item == {item.pk: JUDGMENTS_PER_ITEM for item in study.items.all()}
    assert max(Counter(Judgment.objects.values_list("item_id", "annotator_id")).values()) == 1
    assert not Assignment.objects.filter(state=Assignment.State.ACTIVE).exists()
    assert Assignment.objects.filter(state=Assignment.State.SUBMITTED).count() == ITEMS * JUDGMENTS_PER_ITEM
    skipped = set(Assignment.objects.filter(state=Assignment.State.SKIPPED).values_list("item_id", "annotator_id"))
    assert skipped == set(skipped_items)
    assert not skipped & set(Judgment.objects.values_list("item_id", "annotator_id"))
    assert_counts_hold(study)
