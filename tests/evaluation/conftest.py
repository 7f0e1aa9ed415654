"""A small proxy study whose every statistic can be worked out by hand.

Six items, three options, three judgments per item. Votes per item (annotators ann1, ann2, ann3
choosing display positions); `gold` is the gold's position:

    item 0  gold 0  votes 0 0 0   all agree on the gold
    item 1  gold 1  votes 1 1 0   majority right
    item 2  gold 2  votes 0 1 2   none agree, majority wrong
    item 3  gold 0  votes 2 2 2   all agree on a wrong option (RELiC Table A4)
    item 4  gold 1  votes 1 0     incomplete: only two judgments
    item 5  gold 0  votes 0 0 0   all agree on the gold

The dense run's answers: item 0 right, item 1 wrong, item 2 right (only the gold is among its
stored hits), item 3 not covered (its only stored hit is a passage not shown), item 4 right (a tie broken by its
rank), item 5 wrong (so item 5 is a "humans agree, model fails" item, RELiC Table 5).
The BM25 run supplied the negatives.
"""

from dataclasses import dataclass

import pytest

from evaluation import services
from tests.factories import (
    add_hits,
    add_judgment,
    make_collection,
    make_passages,
    make_proxy_study,
    make_run,
    make_user,
)

GOLD_POSITIONS = [0, 1, 2, 0, 1, 0]
VOTES = [[0, 0, 0], [1, 1, 0], [0, 1, 2], [2, 2, 2], [1, 0], [0, 0, 0]]
COMPLETE_COUNTS = [[3, 0, 0], [1, 2, 0], [1, 1, 1], [0, 0, 3], [3, 0, 0]]


@dataclass
class HandWorkedStudy:
    study: object
    items: list
    annotators: list
    dense: object
    bm25: object


def _candidate(item, position):
    return item.candidates.get(position=position).passage


@pytest.fixture
def hand_worked(db):
    collection = make_collection()
    bm25 = make_run(collection, kind="bm25")
    dense = make_run(collection, kind="dense")
    study = make_proxy_study(collection, gold_positions=GOLD_POSITIONS, negatives_run=bm25)
    items = list(study.items.order_by("position"))
    annotators = [make_user(f"ann{number}") for number in (1, 2, 3)]
    for item, votes in zip(items, VOTES):
        for annotator, position in zip(annotators, votes):
            add_judgment(item, annotator, position)

    def scores(item, *pairs):
        add_hits(dense, item.query, [(_candidate(item, position), score) for position, score in pairs])

    scores(items[0], (0, 9.0), (2, 5.0), (1, 1.0))
    scores(items[1], (0, 7.0), (1, 6.0), (2, 0.5))
    scores(items[2], (2, 3.0))
    add_hits(dense, items[3].query, [(make_passages(collection, 1)[0], 10.0)])
    scores(items[4], (1, 4.0), (0, 4.0), (2, 1.0))
    scores(items[5], (2, 8.0), (0, 2.0))
    return HandWorkedStudy(study, items, annotators, dense, bm25)


@pytest.fixture
def computations(monkeypatch):
    """The study ids `study_report` computes a report for (a cache miss each), in order."""
    calls = []
    original = services.study_report

    def counting(study, model_runs=()):
        calls.append(study.pk)
        return original(study, model_runs)

    monkeypatch.setattr(services, "study_report", counting)
    return calls
