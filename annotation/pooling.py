"""Pooling strategies: which (query, passage) pairs of several runs a relevance study judges, and
in which order. Plain classes on plain data (ranks in, pairs out), one per strategy, like
doccano's assignment strategies; `annotation.services.pools` stores what they choose and feeds
the adaptive one the judgments as they land. The definitions, with the papers they come from,
are in docs/DESIGN.md ("Pools").

Every strategy sees the same candidates: the union of the runs' top `depth` hits per query (a
pair several runs found is one candidate, with each run's rank). The static strategies order all
candidates once; a budget (in judged pairs, in all and/or per query) takes the first ones:

- `Depth`: by the best rank any run gives the pair, so a budget judges every run's rank 1, then
  every rank 2, ... (TREC's depth-k pool when nothing cuts it short);
- `ReciprocalRankFusion`: by sum over runs of 1 / (k + rank) (Cormack, Clarke & Büttcher 2009);
- `RankBiasedPrecision`: by sum over runs of (1 - p) p^(rank - 1), each run's RBP weight of the
  rank (Moffat & Zobel 2008).

Ties go to the query the study lists first (its seeded order), then the passage's external id.
Scores are summed with `math.fsum`, exactly rounded whatever the order of the runs, so pairs
with the same ranks in different runs tie exactly.

`MoveToFront` (Cormack, Palmer & Clarke 1998) is adaptive: it picks the next pair to judge from
the judgments already made, so it keeps a state (a priority per source and the source holding
the turn) and is told each outcome.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

DEFAULT_RRF_K = 60
DEFAULT_RBP_P = 0.8


@dataclass
class Candidate:
    """A (query, passage) pair some run retrieved within the pool's depth. `key` is the passage's
    external id (ties are broken on it, the same on every database); `ranks` maps run id to the
    run's rank of the passage for the query."""

    query: int
    passage: int
    key: str
    ranks: dict[int, int] = field(default_factory=dict)

    @property
    def best_rank(self) -> float:
        """The best rank any run gives the pair (infinite for a pair only a query's own pool holds)."""
        return min(self.ranks.values(), default=math.inf)


class StaticStrategy:
    """Orders every candidate once; a budget judges a prefix of that order."""

    name: ClassVar[str]
    adaptive: ClassVar[bool] = False

    def score(self, ranks: dict[int, int]) -> float | None:
        """The fusion score of a pair from its runs' ranks (None: the strategy has none)."""
        return None

    def order(self, candidates: Iterable[Candidate], query_order: Sequence[int]) -> list[Candidate]:
        """The candidates in judging order."""
        place = {query: index for index, query in enumerate(query_order)}
        return sorted(candidates, key=lambda candidate: self._key(candidate, place[candidate.query]))

    def _key(self, candidate: Candidate, query_place: int) -> tuple:
        return (-self.score(candidate.ranks), query_place, candidate.key)


class Depth(StaticStrategy):
    name = "depth"

    def _key(self, candidate: Candidate, query_place: int) -> tuple:
        return (candidate.best_rank, query_place, candidate.key)


@dataclass
class ReciprocalRankFusion(StaticStrategy):
    k: int = DEFAULT_RRF_K
    name: ClassVar[str] = "rrf"

    def score(self, ranks: dict[int, int]) -> float:
        return math.fsum(1.0 / (self.k + rank) for rank in ranks.values())


@dataclass
class RankBiasedPrecision(StaticStrategy):
    p: float = DEFAULT_RBP_P
    name: ClassVar[str] = "rbp"

    def score(self, ranks: dict[int, int]) -> float:
        return math.fsum((1.0 - self.p) * self.p ** (rank - 1) for rank in ranks.values())


def majority_label(labels: Sequence):
    """The most frequent label, the lowest of them on a tie (export_qrels' majority rule)."""
    counts = Counter(labels)
    top = max(counts.values())
    return min(label for label, count in counts.items() if count == top)


def within_budget(ordered: Iterable[Candidate], budget: int | None, budget_per_query: int | None) -> list[Candidate]:
    """The first candidates of `ordered` that fit the budget in all and the budget per query."""
    chosen: list[Candidate] = []
    per_query: dict[int, int] = {}
    for candidate in ordered:
        if budget is not None and len(chosen) == budget:
            break
        if budget_per_query is not None and per_query.get(candidate.query, 0) == budget_per_query:
            continue
        per_query[candidate.query] = per_query.get(candidate.query, 0) + 1
        chosen.append(candidate)
    return chosen


Source = tuple[int, int]  # (query id, run id): one run's ranking for one query


class MoveToFront:
    """Move-to-front pooling (Cormack, Palmer & Clarke 1998), over every (query, run) source.

    Every source starts at priority 0. The source holding the turn gives its best-ranked pair not
    yet drawn (pairs another source drew already are passed over). A relevant outcome gives the
    turn to the source that drew the pair (it moves to the front: it keeps the turn while it
    yields relevant pairs); a non-relevant one lowers that source's priority by 1, and if it held
    the turn, the turn goes to the source of highest priority. Ties go to the source whose query
    has had the fewest pairs drawn, then to the query listed first, then to the run listed first:
    for one query that is the run order, and over several queries each priority level is spread
    across the queries before any query gets a second turn at it. Each query's own sequence of
    draws is Cormack et al.'s local MTF on that query.

    Outcomes may arrive after further pairs were drawn (several annotators judge at once, and an
    item is decided only when all its judgments are in): a pair drawn ahead comes from the source
    holding the turn at the time, and each outcome is applied when it arrives.
    """

    name = "mtf"
    adaptive = True

    def __init__(
        self,
        queries: Sequence[int],
        runs: Sequence[int],
        priorities: dict[Source, int] | None = None,
        turn: Source | None = None,
    ):
        self.query_place = {query: index for index, query in enumerate(queries)}
        self.run_place = {run: index for index, run in enumerate(runs)}
        self.priorities = dict(priorities or {})
        self.turn = turn

    def priority(self, source: Source) -> int:
        return self.priorities.get(source, 0)

    def next_source(self, open_sources: Iterable[Source], drawn_per_query: dict[int, int]) -> Source | None:
        """The source that gives the next pair: the one holding the turn while it has pairs left,
        else the highest-priority one of `open_sources` (those with pairs left whose query is
        under its budget), which then holds the turn. None when no source has pairs left."""
        open_sources = set(open_sources)
        if self.turn in open_sources:
            return self.turn
        if not open_sources:
            return None
        self.turn = min(
            open_sources,
            key=lambda source: (
                -self.priority(source),
                drawn_per_query.get(source[0], 0),
                self.query_place[source[0]],
                self.run_place[source[1]],
            ),
        )
        return self.turn

    def record(self, source: Source, relevant: bool) -> None:
        """Apply the outcome of a pair `source` drew."""
        if relevant:
            self.turn = source
            return
        self.priorities[source] = self.priority(source) - 1
        if self.turn == source:
            self.turn = None

    # The state as stored on the pool (JSON keys are strings).
    def state(self) -> dict:
        return {
            "priorities": {f"{query}:{run}": value for (query, run), value in sorted(self.priorities.items())},
            "turn": list(self.turn) if self.turn is not None else None,
        }

    @classmethod
    def from_state(cls, queries: Sequence[int], runs: Sequence[int], state: dict) -> MoveToFront:
        priorities = {}
        for key, value in (state.get("priorities") or {}).items():
            query, run = key.split(":")
            priorities[int(query), int(run)] = value
        turn = state.get("turn")
        return cls(queries, runs, priorities, tuple(turn) if turn else None)


STRATEGY_NAMES = (Depth.name, ReciprocalRankFusion.name, RankBiasedPrecision.name, MoveToFront.name)


def static_strategy(name: str, *, rrf_k: int = DEFAULT_RRF_K, rbp_p: float = DEFAULT_RBP_P) -> StaticStrategy:
    """The static strategy called `name`, with its parameter."""
    if name == ReciprocalRankFusion.name:
        return ReciprocalRankFusion(k=rrf_k)
    if name == RankBiasedPrecision.name:
        return RankBiasedPrecision(p=rbp_p)
    return Depth()
