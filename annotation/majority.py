"""The majority vote over one item's labels, the platform's one plurality rule: the humans'
aggregated labels (evaluation.qrels.aggregate_labels, the reports), a judge's vote over its own
samples (the judge card) and a judge ensemble's majority (judges.ensemble) all read it from here.
Its own module below the judges and evaluation, which both use it; pure Python, no database.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

TIE_RULES = (None, "lowest", "highest")


def is_missing(value) -> bool:
    return value is None or (isinstance(value, (float, np.floating)) and math.isnan(value))


def sorted_labels(labels: Iterable, what: str) -> list:
    """Labels in their natural order; an order is needed for weighted kappa and tie rules."""
    try:
        return sorted(set(labels))
    except TypeError as error:
        raise ValueError(f"{what} mix types that cannot be ordered ({error})") from error


@dataclass(frozen=True)
class MajorityVote:
    """The most frequent label of one item. `label` is None when the top count is shared and no
    tie rule was given; `tied_labels` (sorted) is non-empty exactly when there was a tie, whether
    or not a rule then picked one of them."""

    label: object
    votes: int
    raters: int
    tied_labels: tuple

    @property
    def is_tie(self) -> bool:
        return bool(self.tied_labels)


def majority_votes(labels_per_item: Sequence[Sequence], tie_rule: str | None = None) -> list[MajorityVote]:
    """Plurality label of every item; ties are reported, never broken silently.

    tie_rule None leaves a tied item without a label; "lowest" / "highest" take the smallest or
    largest tied label in sort order (for yes/no labels, "lowest" resolves a tie as False:
    the conservative reading for "is this quotable?"). Every item needs at least one label.
    """
    if tie_rule not in TIE_RULES:
        raise ValueError(f"unknown tie rule {tie_rule!r}: use None, 'lowest' or 'highest'")
    votes = []
    for item, labels in enumerate(labels_per_item):
        if not len(labels):
            raise ValueError(f"item {item} has no labels")
        if any(is_missing(label) for label in labels):
            raise ValueError(f"item {item}: missing label; leave it out of the item's list")
        tally = Counter(labels)
        top = max(tally.values())
        leaders = sorted_labels((label for label, count in tally.items() if count == top), f"item {item}'s labels")
        if len(leaders) == 1:
            votes.append(MajorityVote(leaders[0], top, len(labels), ()))
            continue
        chosen = {None: None, "lowest": leaders[0], "highest": leaders[-1]}[tie_rule]
        votes.append(MajorityVote(chosen, top, len(labels), tuple(leaders)))
    return votes
