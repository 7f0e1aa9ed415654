"""Candidate hygiene: which negatives a proxy item must not show, and the tally of those passed over.

Exact checks (a shared sentence with the gold, the same text twice) miss near-copies: BEIR
collections such as BIRCO's RELiC hold overlapping windows of one novel, and a window that
differs from another by a word or two of punctuation, a quotation mark or a reflowed line shares
no exact sentence with it yet reads as the same passage, and two windows that both hold one
quoted sentence offer it twice. Two texts are near-duplicates when most of the shorter one's word
shingles (runs of SHINGLE_WORDS words, case and punctuation ignored) also occur in the other (the
containment of the shorter text, so a negative that contains the whole gold counts as much as an
edited copy) and they add up to a sentence's worth, or when both hold the same run of
SHARED_RUN_WORDS words (a shared sentence).

An item with a near-duplicate measures ambiguity rather than skill, so the proxy planner drops
such a negative and takes the next one of the run; the tally is stored in the study's
parameters (`candidate_hygiene`) so the staff see how much the run had to be skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

SHINGLE_WORDS = 5
# "Most of" the shorter text: more than half of its shingles found in the other.
NEAR_DUPLICATE_SHARE = 0.5
# A run of this many words in both texts is a shared sentence (about 60 characters), whatever
# the share: two windows that both hold the same quoted sentence offer it twice.
SHARED_RUN_WORDS = 10
# Short texts share "most" of themselves by chance ("of the novel says something of its own" is
# most of an 11-word sentence): the shared shingles must add up to at least a run's worth.
MIN_SHARED_SHINGLES = SHARED_RUN_WORDS - SHINGLE_WORDS + 1
_WORD = re.compile(r"\w+")

# Why a negative of the run was passed over, in the order the planner asks.
OTHER_RELEVANT = "other_relevant"  # another relevant passage of the query
OVERLAPS_GOLD = "overlaps_gold"  # same sentences as the gold, or a near-copy of it
DUPLICATES_NEGATIVE = "duplicates_negative"  # the same text as, or a near-copy of, a chosen negative
REPEATS_CONTEXT = "repeats_context"  # its text is in what the annotator reads beside the candidates
REASONS = (OTHER_RELEVANT, OVERLAPS_GOLD, DUPLICATES_NEGATIVE, REPEATS_CONTEXT)


@dataclass(frozen=True)
class TextPrint:
    """What near-duplicate checks compare: the text's word shingles and its long word runs."""

    shingles: frozenset
    runs: frozenset


def _windows(words: list[str], size: int) -> frozenset[tuple[str, ...]]:
    """Every run of `size` consecutive words; a shorter text is one run of all its words."""
    if len(words) <= size:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[index : index + size]) for index in range(len(words) - size + 1))


def text_print(text: str) -> TextPrint:
    """The text's shingles of SHINGLE_WORDS and runs of SHARED_RUN_WORDS words (lower case,
    punctuation dropped)."""
    words = _WORD.findall(text.lower())
    runs = _windows(words, SHARED_RUN_WORDS) if len(words) >= SHARED_RUN_WORDS else frozenset()
    return TextPrint(_windows(words, SHINGLE_WORDS), runs)


def shared_share(first: TextPrint, second: TextPrint) -> float:
    """The share of the smaller shingle set that the other text also holds (0 when either is empty)."""
    smaller = min(len(first.shingles), len(second.shingles))
    return len(first.shingles & second.shingles) / smaller if smaller else 0.0


def near_duplicates(first: TextPrint, second: TextPrint) -> bool:
    """Most of the shorter text (and at least a sentence's worth) is in the other, or both hold
    the same sentence-long run."""
    if not first.runs.isdisjoint(second.runs):
        return True
    shared = len(first.shingles & second.shingles)
    smaller = min(len(first.shingles), len(second.shingles))
    return shared >= MIN_SHARED_SHINGLES and shared > NEAR_DUPLICATE_SHARE * smaller


@dataclass
class HygieneTally:
    """Negatives passed over, by reason, over the items a study keeps."""

    dropped: Counter = field(default_factory=Counter)
    items_affected: int = 0

    def add(self, item_drops: Counter) -> None:
        self.dropped.update(item_drops)
        self.items_affected += bool(sum(item_drops.values()))

    def as_parameters(self) -> dict:
        """The study parameter: counts per reason, their total, the items that needed a
        replacement and the rule's settings (so a later change of them stays readable)."""
        return {
            **{reason: self.dropped[reason] for reason in REASONS},
            "negatives_replaced": sum(self.dropped.values()),
            "items_affected": self.items_affected,
            "rule": {
                "shingle_words": SHINGLE_WORDS,
                "near_duplicate_share": NEAR_DUPLICATE_SHARE,
                "shared_run_words": SHARED_RUN_WORDS,
                "min_shared_shingles": MIN_SHARED_SHINGLES,
            },
        }
