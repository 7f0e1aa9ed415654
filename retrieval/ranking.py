"""Turning scores into rankings: one rule for every run, our own and imported ones.

trec_eval orders a query's documents by score, descending, and equal scores by document id
(docno), descending, in byte order; ir-measures and pytrec_eval inherit the rule, and
`import_run` follows it. Runs made here follow it too, so `evaluate_run` on a run gives the same
figures as trec_eval on the run's `export_run` file. A candidate set's ids are turned into a
tie-break key once (`tie_break`), after which ranking is numpy over whole blocks of score rows:
the top `depth` of each row are found by partitioning, and only those contenders are sorted, so
the cost grows with the rows, not with sorting every score.

No Django here: the benchmarks and the contract checks use it bare.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def tie_break(external_ids: Sequence[str]) -> np.ndarray:
    """For each candidate, its position among the set's ids in ascending order: among equal
    scores the larger key ranks first (trec_eval's docno descending). Python compares strings
    by code point, which is UTF-8 byte order, trec_eval's `strcmp`."""
    key = np.empty(len(external_ids), dtype=np.int64)
    key[sorted(range(len(external_ids)), key=external_ids.__getitem__)] = np.arange(len(external_ids))
    return key


def top_ranked(scores: np.ndarray, depth: int, key: np.ndarray, by_key: np.ndarray | None = None) -> np.ndarray:
    """Columns of each row's top `depth` scores, best first (ties: larger `key` first), as an
    array of shape (rows, min(depth, columns)). One partition of the block finds each row's
    depth-th largest score; the scores at least that large are the row's top unless the
    threshold itself is tied (then the tied candidates with the largest keys complete it), and
    only those `depth` are sorted. `by_key` (np.argsort(-key)) may be given by a caller that
    ranks many blocks against the same candidates, so ties do not sort the columns again per block."""
    rows, columns = scores.shape
    depth = min(depth, columns)
    if depth == 0 or rows == 0:
        return np.zeros((rows, depth), dtype=np.int64)
    if depth == columns:
        return _ordered(scores, np.broadcast_to(np.arange(columns), (rows, columns)), key)
    threshold = np.partition(scores, columns - depth, axis=1)[:, columns - depth]
    contenders = scores >= threshold[:, None]
    if np.count_nonzero(contenders) == rows * depth:  # every row holds exactly its top
        return _ordered(scores, (np.flatnonzero(contenders) % columns).reshape(rows, depth), key)
    top = np.empty((rows, depth), dtype=np.int64)
    by_key = np.argsort(-key) if by_key is None else by_key  # columns, largest key first
    for row, (values, bound) in enumerate(zip(scores, threshold.tolist())):
        above = np.flatnonzero(values > bound)
        tied = by_key[values[by_key] == bound][: depth - len(above)]
        top[row] = np.concatenate((above, tied))
    return _ordered(scores, top, key)


def _ordered(scores: np.ndarray, columns: np.ndarray, key: np.ndarray) -> np.ndarray:
    """`columns` of each row sorted by score descending, equal scores by key descending. Rows
    are sorted by score alone first; the few rows with equal scores are sorted again by both."""
    chosen = np.take_along_axis(scores, columns, axis=1)
    order = np.argsort(-chosen, axis=1)
    ranked = np.take_along_axis(columns, order, axis=1)
    values = np.take_along_axis(chosen, order, axis=1)
    for row in np.flatnonzero((values[:, 1:] == values[:, :-1]).any(axis=1)).tolist():
        ranked[row] = columns[row][np.lexsort((-key[columns[row]], -chosen[row]))]
    return ranked


def ranks_of(scores: np.ndarray, columns: Sequence[Sequence[int]], key: np.ndarray) -> list[list[int]]:
    """For each row of a block of scores, the 1-based rank `top_ranked` gives each of that row's
    `columns`, counted over every candidate (exact far beyond any stored depth). One call per
    block: most rows (queries without a relevant passage in the set) cost nothing."""
    ranks: list[list[int]] = []
    for row, wanted in zip(scores, columns):
        ranks.append([])
        for column in wanted:
            score = row[column]
            ties_above = np.count_nonzero((row == score) & (key > key[column]))
            ranks[-1].append(int(np.count_nonzero(row > score) + ties_above) + 1)
    return ranks
