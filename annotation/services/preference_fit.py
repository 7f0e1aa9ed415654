"""Bradley-Terry and Plackett-Luce fits, through choix (I-LSR, Maystre and Grossglauser 2015):
the one place that calls it, for the informative-pair rule here and for the study's scores in
evaluation.preference_scores. choix loads scipy.stats (over a second), so this module is named by
dotted path where a request may reach it (preference_scheduling) and never imported at start.

Ties: a tie is half a win to each side. In a pair, the win matrix holds 1/2 in both cells
(choix's dense I-LSR takes real counts); in a list, the tied candidates are entered in every
order they could take, each order weighing the same share of the list's one answer (for two
candidates, the pairwise half win). Kept rather than left out because a tie is evidence that the
two are close: dropping it would let one strict answer on the pair pull them as far apart as an
undisputed one does. "Both bad" says nothing about which is better and is left out.

Regularisation: choix's `alpha` (the rate every pair's Markov-chain transition starts from, a
pseudo-count): with alpha > 0 every passage gets a finite score even if it never won or never
lost; alpha = 0 is the plain maximum-likelihood fit, which such data does not have.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence

import choix
import numpy as np

from retrieval.errors import InputError

from .preference_designs import DEFAULT_ALPHA, Pair, all_pairs

MAX_ITERATIONS = 10_000


def win_matrix(size: int, tallies: Iterable[tuple[int, int, float, float]]) -> np.ndarray:
    """wins[i, j] = how often i beat j (ties 1/2 each), from (i, j, wins of i, wins of j)."""
    wins = np.zeros((size, size))
    for i, j, wins_i, wins_j in tallies:
        wins[i, j] += wins_i
        wins[j, i] += wins_j
    return wins


def bradley_terry(wins: np.ndarray, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """Log-scale Bradley-Terry scores summing to 0 (choix.ilsr_pairwise_dense)."""
    return _fitted(lambda: choix.ilsr_pairwise_dense(wins, alpha=alpha, max_iter=MAX_ITERATIONS), alpha)


def plackett_luce(size: int, answers: Sequence[list[list[int]]], alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """Log-scale Plackett-Luce scores summing to 0 from list answers (tie groups of item indices,
    best first) through choix.ilsr_rankings. A list whose members share places is entered once
    per order of its tied members, every answer weighing the same: the data hold each of an
    answer's T orders M / T times (M the least common multiple of the T's) and alpha is scaled by
    M, which leaves the fit exactly that of the weighted answers. An answer with everything tied
    says nothing about order and is left out."""
    expanded = [(orders := _orders(groups), len(orders)) for groups in answers if len(groups) > 1]
    if not expanded:
        return np.zeros(size)
    scale = math.lcm(*(count for _, count in expanded))
    data = [order for orders, count in expanded for order in orders for _ in range(scale // count)]
    return _fitted(lambda: choix.ilsr_rankings(size, data, alpha=alpha * scale, max_iter=MAX_ITERATIONS), alpha)


def _orders(groups: list[list[int]]) -> list[list[int]]:
    """Every full order consistent with the tie groups."""
    return [
        [member for part in parts for member in part]
        for parts in itertools.product(*(itertools.permutations(group) for group in groups))
    ]


def _fitted(fit, alpha: float) -> np.ndarray:
    try:
        scores = fit()
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        hint = " (a passage never won or never lost): use alpha > 0" if alpha == 0 else ""
        raise InputError(f"the comparisons do not determine the scores{hint}: {exc}", field="alpha") from None
    if not np.all(np.isfinite(scores)):
        raise InputError("the comparisons do not determine finite scores: use a larger alpha", field="alpha")
    return scores - scores.mean()


def least_certain_pairs(
    pool: Sequence[int],
    tallies: dict[Pair, tuple[float, float, int]],
    taken: set[Pair],
    count: int,
    rng: random.Random,
    alpha: float = DEFAULT_ALPHA,
) -> list[Pair]:
    """The informative-pair rule: the `count` pairs of the pool not asked yet whose outcome the
    Bradley-Terry fit of the answers so far is least sure of (win probability closest to 1/2);
    among equally uncertain pairs, those whose passages were compared least, then a seeded draw."""
    index = {passage: position for position, passage in enumerate(pool)}
    known = [(pair, tally) for pair, tally in tallies.items() if pair[0] in index and pair[1] in index]
    wins = win_matrix(len(pool), ((index[a], index[b], first, second) for (a, b), (first, second, _) in known))
    scores = bradley_terry(wins, alpha) if wins.sum() > 0 else np.zeros(len(pool))
    compared = dict.fromkeys(pool, 0)
    for (a, b), (_, _, judged) in known:
        compared[a] += judged
        compared[b] += judged
    candidates = [pair for pair in all_pairs(pool) if pair not in taken]
    rng.shuffle(candidates)

    def uncertainty(pair: Pair) -> tuple[float, int]:
        # |P(first wins) - 1/2| = |tanh(d / 2)| / 2 for a score difference d (no overflow).
        difference = scores[index[pair[0]]] - scores[index[pair[1]]]
        return abs(math.tanh(difference / 2)) / 2, compared[pair[0]] + compared[pair[1]]

    candidates.sort(key=uncertainty)
    return candidates[:count]
