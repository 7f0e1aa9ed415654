"""What a retriever must provide to produce a run, and how a query becomes text.

A `Scorer` scores one candidate set at a time: the queries that share the set (one book and
quote length for RELiC, one query's pool, or the whole collection) against its passages. Before
that, a run tells it every query text it will ask about and then each group of passages
(`prepare`), so a scorer that encodes (dense) encodes each text once, in batches across candidate
sets, instead of one small batch per set. The run service (retrieval/services/runs.py) turns the
scores into ranked hits and gold ranks, the same way for every retriever.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from jobs.progress import Progress

from .models import Passage, Query


class Scorer(Protocol):
    # Inserted between left and right context for retrievers that understand a mask (dense).
    mask_token: str | None

    def prepare(self, queries: list[str], passages: Sequence[Passage], progress: Progress) -> None:
        """Get ready to score these query texts and passages (the passages of the next candidate
        sets, replacing the last ones); a scorer that needs nothing ahead does nothing."""
        ...

    def score(self, queries: list[str], passages: Sequence[Passage], progress: Progress) -> np.ndarray:
        """Scores of shape (len(queries), len(passages)), float64; higher is better."""
        ...


def query_text(query: Query, context_left: int, context_right: int, mask_token: str | None) -> str:
    """RELiC queries: the last L sentences of left context, the mask (if the retriever uses one),
    the first R of right context. Plain-text queries are used as they are."""
    return context_text(query.text, query.left_context, query.right_context, context_left, context_right, mask_token)


def context_text(
    text: str, left_context: list, right_context: list, context_left: int, context_right: int, mask_token: str | None
) -> str:
    """query_text of a query's columns, for readers of many queries that build no Query objects."""
    if not (left_context or right_context):
        return text
    left = list(left_context)[-context_left:] if context_left else []
    right = list(right_context)[:context_right] if context_right else []
    parts = [*left, mask_token, *right] if mask_token else [*left, *right]
    return " ".join(part.strip() for part in parts if part and part.strip())
