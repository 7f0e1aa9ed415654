"""Twenty annotators judging one move-to-front study at once, in threads with their own database
connections (SQLite by default, Postgres when DATABASE_URL points at one): the pool never passes
its budget, no pair is judged beyond its judgments per item, no judgment is lost or duplicated,
every drawn pair is decided once, and the pool's record replays through the strategy exactly —
each draw came from the source the rule gave the turn to, given every outcome decided before it."""

import threading
from collections import Counter

import pytest
from django.db import connection

from annotation.models import Assignment, Judgment, PooledPair, PoolHit
from annotation.pooling import MoveToFront
from annotation.services import claim_next_item, create_relevance_study, submit_judgment
from tests.factories import make_annotator, make_label_collection, make_scored_run

ANNOTATORS = 20
JUDGMENTS_PER_ITEM = 2
BUDGET = 30
QUERIES, PASSAGES, RUNS = 4, 12, 3


def relevant(query: str, passage: str) -> bool:
    """The truth every annotator agrees on: a sparse, query-dependent set of relevant pairs."""
    return (int(query[1:]) * 7 + int(passage[1:])) % 5 == 0


def mtf_study():
    collection = make_label_collection(QUERIES, PASSAGES)
    runs = [
        make_scored_run(
            collection,
            {f"q{q}": {f"d{(p * (r + 2) + q) % PASSAGES}": PASSAGES - p for p in range(8)} for q in range(QUERIES)},
        )
        for r in range(RUNS)
    ]
    return create_relevance_study(
        name="racing pool",
        collection=collection,
        runs=runs,
        depth=8,
        pool="mtf",
        budget=BUDGET,
        lookahead=2,
        judgments_per_item=JUDGMENTS_PER_ITEM,
    ).study


def judge(study, annotator, stored: list, errors: list) -> None:
    """Claim and answer (twice, like a double click) until nothing is left for this annotator."""
    try:
        while (assignment := claim_next_item(study, annotator)) is not None:
            item = assignment.item
            candidate = item.candidates.select_related("passage").get()
            label = int(relevant(item.query.external_id, candidate.passage.external_id))
            for _ in range(2):
                submission = submit_judgment(annotator=annotator, item=item, label=label)
                if submission.created:
                    stored.append(submission.judgment.pk)
    except Exception as exc:
        errors.append(exc)
    finally:
        connection.close()


def replay(study) -> int:
    """Replay the pool's numbered draws and decisions through MoveToFront; every draw must be the
    best-ranked undrawn pair of the source the strategy picks at that moment. Returns the events."""
    pool = study.pool
    hits = {}
    for pair, run, rank in PoolHit.objects.filter(pair__pool=pool).values_list("pair_id", "run_id", "rank"):
        hits.setdefault(pair, {})[run] = rank
    pairs = {pair.pk: pair for pair in PooledPair.objects.filter(pool=pool)}
    events = sorted(
        [(pair.order, "draw", pair) for pair in pairs.values() if pair.item_id is not None]
        + [(pair.decided, "decide", pair) for pair in pairs.values() if pair.decided is not None]
    )
    assert [number for number, _, _ in events] == list(range(1, len(events) + 1))
    strategy, undrawn, per_query = MoveToFront(pool.queries, pool.runs), set(pairs), Counter()
    for _, kind, pair in events:
        source = (pair.query_id, pair.drawn_from_id)
        if kind == "decide":
            strategy.record(source, pair.relevant)
            continue
        open_sources = {(pairs[pk].query_id, run) for pk in undrawn for run in hits[pk]}
        assert strategy.next_source(open_sources, per_query) == source
        candidates = [pk for pk in undrawn if pairs[pk].query_id == source[0] and source[1] in hits[pk]]
        assert pair.pk == min(candidates, key=lambda pk: (hits[pk][source[1]], pk))
        undrawn.discard(pair.pk)
        per_query[pair.query_id] += 1
    return len(events)


@pytest.mark.django_db(transaction=True)
def test_twenty_annotators_never_push_move_to_front_past_its_budget():
    study = mtf_study()
    annotators = [make_annotator(f"racer{n}") for n in range(ANNOTATORS)]
    stored: list[int] = []
    errors: list[Exception] = []
    threads = [threading.Thread(target=judge, args=(study, annotator, stored, errors)) for annotator in annotators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert study.items.count() == BUDGET  # enough pairs to spend it all, and not one more
    per_item = Counter(Judgment.objects.filter(item__study=study).values_list("item_id", flat=True))
    assert per_item == {item.pk: JUDGMENTS_PER_ITEM for item in study.items.all()}
    assert max(Counter(Judgment.objects.values_list("item_id", "annotator_id")).values()) == 1
    assert sorted(stored) == sorted(Judgment.objects.values_list("pk", flat=True))  # none lost, none twice
    assert not Assignment.objects.filter(state=Assignment.State.ACTIVE).exists()
    decided = PooledPair.objects.filter(pool__study=study, decided__isnull=False)
    assert decided.count() == BUDGET
    assert all(
        pair.relevant == relevant(pair.query.external_id, pair.passage.external_id)
        for pair in decided.select_related("query", "passage")
    )
    assert replay(study) == 2 * BUDGET
