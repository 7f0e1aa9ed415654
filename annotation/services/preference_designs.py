"""Which candidates a preference study compares, as plain functions of a query's pool (passage ids)
and a seeded RNG; the database side is preference_studies.py (creation) and
preference_scheduling.py (adaptive designs, as judgments land).

Fixed designs: every pair of the pool ("all-pairs"); a random subset of `budget` pairs
("random"); for lists, `budget` lists of `size` passages drawn so that every passage appears
about equally often (each list takes the next passages of a seeded shuffle of the pool, reshuffled
when it runs out).

Adaptive design, rule "top-k": the procedure of Clarke, Vtyurina and Smucker ("Assessing top-k
preferences", ACM TOIS 39(3), 2021), as their own judging manager implements it
(github.com/claclark/preferences, prefj.py), with the parameters k (the top passages wanted), p
(first-stage pairings) and f (the all-pairs threshold), p > k and f > p:
1. The contenders are the query's pool.
2. While more than f contenders remain, a first-stage round: pairs are drawn until every
   contender is in at least min(p, contenders - 1) of them (repeatedly: shuffle the contenders,
   order them by how many pairs they are in so far, take the first pair in that order not drawn
   yet in this round). When every pair of the round is judged, a contender's score is the wins it
   collected in the round's pairs; those with more than floor(p / 2) wins stay in contention.
3. Once at most f contenders remain, a final round: every pair of them. Ranked by their wins in
   it, the first k (and any tied with the k-th) with at least one win are the top k, best first.
Where this differs from prefj.py, on purpose: a pair judged in an earlier round is not asked
again (its outcome counts in the later round: a consistent assessor would repeat it); a tie
counts half a win to each side and "both bad" a win to neither (prefj.py knows strict answers
only); a pair judged by several annotators counts the mean of their outcomes; and p and f default
to max(7, 2k - 1) and p + 2 rather than 7 and 9, because with p = 7 and k = 5 the fifth-best
passage of a consistent assessor can meet the four better ones among its seven opponents, win
only three and be dropped (p >= 2k - 1 guarantees it more than floor(p / 2) wins). Clarke et al.
start from the passages graded relevant; here the pool is the runs' top passages the study was
made from.

Adaptive design, rule "informative" (Bradley-Terry): with every judgment, the scores are refitted
and the pairs whose outcome the fit is least sure of (win probability closest to 1/2) are asked
next, `batch` at a time per query, each pair once, until the budget is spent
(preference_fit.least_certain_pairs).
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Pair = tuple[int, int]  # passage ids, smaller first
# choix's regularisation (preference_fit.py): the informative rule's default and the scores'.
DEFAULT_ALPHA = 0.01


def pair_of(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def all_pairs(pool: Sequence[int]) -> list[Pair]:
    return [pair_of(a, b) for a, b in itertools.combinations(pool, 2)]


def random_pairs(pool: Sequence[int], count: int, rng: random.Random) -> list[Pair]:
    """`count` distinct pairs (at most all of them), uniformly at random."""
    pairs = all_pairs(pool)
    rng.shuffle(pairs)
    return pairs[:count]


def random_lists(pool: Sequence[int], size: int, count: int, rng: random.Random) -> list[list[int]]:
    """`count` lists of `size` distinct passages; each takes the next passages of a shuffled deck
    of the pool (reshuffled when it runs out), so appearances stay within one of each other."""
    lists, deck = [], []
    for _ in range(count):
        chosen: list[int] = []
        while len(chosen) < size:
            if not deck:
                deck = list(pool)
                rng.shuffle(deck)
            passage = deck.pop()
            if passage in chosen:  # a fresh deck's first cards may repeat the list's: keep for the next list
                deck.insert(0, passage)
            else:
                chosen.append(passage)
        lists.append(chosen)
    return lists


@dataclass(frozen=True)
class TopK:
    """The top-k procedure's parameters (see the module docstring)."""

    k: int
    pairings: int
    all_pairs_below: int

    @classmethod
    def with_defaults(cls, k: int, pairings: int | None = None, all_pairs_below: int | None = None) -> TopK:
        pairings = pairings if pairings is not None else max(7, 2 * k - 1)
        return cls(k, pairings, all_pairs_below if all_pairs_below is not None else pairings + 2)

    def problems(self) -> list[tuple[str, str]]:
        """(field, message) for each parameter out of the procedure's range."""
        found = []
        if self.k < 1:
            found.append(("top_k", f"must be at least 1, got {self.k}"))
        if self.pairings <= self.k:
            found.append(("pairings", f"must be greater than k = {self.k}, got {self.pairings}"))
        if self.all_pairs_below <= self.pairings:
            found.append(
                ("all_pairs_below", f"must be greater than pairings = {self.pairings}, got {self.all_pairs_below}")
            )
        return found

    def round_pairs(self, contenders: Sequence[int], rng: random.Random) -> tuple[bool, list[Pair]]:
        """(final, the pairs of the next round over `contenders`)."""
        if len(contenders) <= self.all_pairs_below:
            return True, all_pairs(contenders)
        return False, first_stage_pairs(contenders, self.pairings, rng)

    def survivors(self, contenders: Sequence[int], wins: dict[int, float]) -> list[int]:
        """The contenders a first-stage round keeps: more than floor(p / 2) wins."""
        threshold = self.pairings // 2
        return [passage for passage in contenders if wins.get(passage, 0.0) > threshold]

    def top(self, contenders: Sequence[int], wins: dict[int, float]) -> list[tuple[int, float]]:
        """The final round's top k (with those tied with the k-th), best first, each with its
        wins; passages without a win are never among them. Ties keep pool order."""
        ranked = sorted(contenders, key=lambda passage: -wins.get(passage, 0.0))
        if len(ranked) > self.k:
            cut = wins.get(ranked[self.k - 1], 0.0)
            ranked = [p for index, p in enumerate(ranked) if index < self.k or wins.get(p, 0.0) == cut]
        return [(passage, wins.get(passage, 0.0)) for passage in ranked if wins.get(passage, 0.0) > 0]


def first_stage_pairs(contenders: Sequence[int], pairings: int, rng: random.Random) -> list[Pair]:
    """Pairs until every contender is in at least min(pairings, contenders - 1) of them: each pair
    is the first one not drawn yet in the contenders' order by how many pairs they are in so far
    (ties in a fresh seeded shuffle), so the least-compared contender is always served first."""
    needed = min(pairings, len(contenders) - 1)
    counts = dict.fromkeys(contenders, 0)
    drawn: set[Pair] = set()
    pairs: list[Pair] = []
    while needed > 0 and min(counts.values()) < needed:
        order = list(contenders)
        rng.shuffle(order)
        order.sort(key=counts.__getitem__)
        pair = next(
            candidate
            for index, a in enumerate(order)
            for b in order[index + 1 :]
            if (candidate := pair_of(a, b)) not in drawn
        )
        drawn.add(pair)
        pairs.append(pair)
        counts[pair[0]] += 1
        counts[pair[1]] += 1
    return pairs


def round_wins(pairs: Iterable[Pair], tallies: dict[Pair, tuple[float, float, int]]) -> dict[int, float]:
    """Each passage's wins over `pairs`: per pair, the mean share of the win its judgments gave
    each side (1 a win, 1/2 a tie, 0 a loss or "both bad")."""
    wins: dict[int, float] = defaultdict(float)
    for pair in pairs:
        first, second, judged = tallies.get(pair, (0.0, 0.0, 0))
        wins[pair[0]] += first / judged if judged else 0.0
        wins[pair[1]] += second / judged if judged else 0.0
    return wins


def pair_tallies(
    answers: Iterable[tuple[Sequence[int], list[list[int]] | None]],
) -> dict[Pair, tuple[float, float, int]]:
    """Pair -> (wins of its smaller id, wins of its larger id, answers comparing it), a tie
    counting 1/2 to each side and "both bad" nothing. `answers`: (passage ids in display order,
    the answer's tie groups of display positions best first, or None for "both bad"). A list
    answer compares all its pairs."""
    totals: dict[Pair, list] = defaultdict(lambda: [0.0, 0.0, 0])
    for passages, groups in answers:
        level = {}
        if groups is not None:
            level = {passages[position]: depth for depth, group in enumerate(groups) for position in group}
        for a, b in itertools.combinations(passages, 2):
            pair = pair_of(a, b)
            entry = totals[pair]
            entry[2] += 1
            if groups is None:
                continue
            if level[pair[0]] == level[pair[1]]:
                entry[0] += 0.5
                entry[1] += 0.5
            elif level[pair[0]] < level[pair[1]]:
                entry[0] += 1
            else:
                entry[1] += 1
    return {pair: (first, second, judged) for pair, (first, second, judged) in totals.items()}
