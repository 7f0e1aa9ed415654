"""Agreement between marked spans, and the quote-recommendation paper's span metrics.

A span is a (start, end) pair of character offsets into the item's text, end exclusive
(Python slicing: text[start:end]). Annotators drag-select, so their boundaries drift by a
character or a space; comparing *word tokens* instead of characters makes "most of the same
words" count as agreement. Tokens are `\\w+` matches, the tokenisation the retrieval side
uses (DESIGN.md), and a token counts as marked when any of its characters lies in a span.

Empty cases follow the SQuAD convention: two empty selections agree perfectly (F1 = 1),
an empty selection against a non-empty one not at all (F1 = 0).
"""

from __future__ import annotations

import bisect
import itertools
import numbers
import re
from collections import Counter
from collections.abc import Iterable, Sequence

TOKEN_PATTERN = re.compile(r"\w+")

Span = tuple[int, int]


def word_token_offsets(text: str) -> list[Span]:
    """(start, end) offsets of every `\\w+` token of `text`, in order."""
    return [match.span() for match in TOKEN_PATTERN.finditer(text)]


def _checked_spans(text: str, spans: Sequence[Sequence[int]]) -> list[Span]:
    """Spans as int pairs inside the text; a bad span is an annotation or export bug, so it
    is reported by position instead of being clipped."""
    checked = []
    for position, span in enumerate(spans):
        pair = tuple(span) if isinstance(span, Iterable) else (span,)
        integers = all(isinstance(offset, numbers.Integral) and not isinstance(offset, bool) for offset in pair)
        if len(pair) != 2 or not integers:
            raise ValueError(f"span {position} {span!r}: must be a pair of integer character offsets")
        start, end = int(pair[0]), int(pair[1])
        if not 0 <= start < end <= len(text):
            raise ValueError(
                f"span {position} {(start, end)!r}: needs 0 <= start < end <= {len(text)} (the text's length)"
            )
        checked.append((start, end))
    return checked


def covered_tokens(text: str, spans: Sequence[Sequence[int]]) -> frozenset[int]:
    """Indexes of the word tokens that overlap at least one span; overlapping spans just merge."""
    tokens = word_token_offsets(text)
    starts = [start for start, _ in tokens]
    ends = [end for _, end in tokens]
    covered: set[int] = set()
    for start, end in _checked_spans(text, spans):
        # Token [s, e) overlaps [start, end) iff e > start and s < end.
        first = bisect.bisect_right(ends, start)
        last = bisect.bisect_left(starts, end)
        covered.update(range(first, last))
    return frozenset(covered)


def _f1(overlap: int, predicted: int, reference: int) -> float:
    """Harmonic mean of precision overlap/predicted and recall overlap/reference."""
    if predicted == 0 or reference == 0:
        return float(predicted == reference)
    if overlap == 0:
        return 0.0
    return 2.0 * overlap / (predicted + reference)


def _token_set_f1(first: frozenset[int], second: frozenset[int]) -> float:
    return _f1(len(first & second), len(first), len(second))


def span_token_f1(text: str, first_spans: Sequence[Sequence[int]], second_spans: Sequence[Sequence[int]]) -> float:
    """Token-level F1 between two annotators' span sets on the same text (symmetric)."""
    return _token_set_f1(covered_tokens(text, first_spans), covered_tokens(text, second_spans))


def span_exact_match(text: str, first_spans: Sequence[Sequence[int]], second_spans: Sequence[Sequence[int]]) -> bool:
    """Whether two span sets mark exactly the same word tokens: boundaries that differ only by
    spaces or punctuation, or one span versus two adjacent ones, still match."""
    return covered_tokens(text, first_spans) == covered_tokens(text, second_spans)


def mean_pairwise_span_f1(text: str, spans_per_annotator: Sequence[Sequence[Sequence[int]]]) -> float:
    """Mean token F1 over all pairs of annotators of one item: their span agreement."""
    if len(spans_per_annotator) < 2:
        raise ValueError(f"span agreement needs at least two annotators, got {len(spans_per_annotator)}")
    scores = [span_token_f1(text, first, second) for first, second in itertools.combinations(spans_per_annotator, 2)]
    return sum(scores) / len(scores)


def bag_of_words(text: str) -> list[str]:
    """Lowercased `\\w+` tokens, in order."""
    return TOKEN_PATTERN.findall(text.lower())


def bow_f1(predicted: str, gold: str) -> float:
    """Bag-of-words F1 between a predicted quote and the gold one, as in the quote-recommendation
    paper (the QA metric): precision and recall of the token multiset overlap, lowercased, so a
    word repeated twice in both counts twice. Macro-average it over items."""
    predicted_tokens = Counter(bag_of_words(predicted))
    gold_tokens = Counter(bag_of_words(gold))
    overlap = sum((predicted_tokens & gold_tokens).values())
    return _f1(overlap, sum(predicted_tokens.values()), sum(gold_tokens.values()))


def text_exact_match(predicted: str, gold: str) -> bool:
    """Whether a predicted quote is the gold quote, word for word: the same lowercased token
    sequence, so case, spacing and punctuation at the selection's edges do not matter."""
    return bag_of_words(predicted) == bag_of_words(gold)
