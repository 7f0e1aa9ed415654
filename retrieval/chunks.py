"""Bounded IN lists. Ids read or written a chunk at a time keep every query well under each
backend's limit on parameters (SQLite refuses an IN list of a study's every item: "Expression
tree is too large"), whatever the size of the study or run."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

IN_LIST_SIZE = 500


def chunks(values: Sequence, size: int = IN_LIST_SIZE) -> Iterator[Sequence]:
    """`values` in consecutive slices of at most `size`."""
    for start in range(0, len(values), size):
        yield values[start : start + size]
