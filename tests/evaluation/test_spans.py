"""Span agreement and the quote-recommendation span metrics (exact match, bag-of-words F1).

Most cases use one sentence whose word tokens are, with their character offsets:
The 0-3, cat 4-7, sat 8-11, on 12-14, the 15-18, mat 19-22 (and "." at 22).
"""

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import f1_score

from evaluation.spans import (
    bag_of_words,
    bow_f1,
    covered_tokens,
    mean_pairwise_span_f1,
    span_exact_match,
    span_token_f1,
    text_exact_match,
    word_token_offsets,
)

TEXT = "The cat sat on the mat."
CAT, SAT, ON, THE_SECOND, MAT = 1, 2, 3, 4, 5


def test_word_tokens_are_backslash_w_runs_with_their_offsets():
    assert word_token_offsets(TEXT) == [(0, 3), (4, 7), (8, 11), (12, 14), (15, 18), (19, 22)]
    assert word_token_offsets("don't stop") == [(0, 3), (4, 5), (6, 10)]


def test_a_token_counts_as_marked_when_any_of_its_characters_is_in_a_span():
    assert covered_tokens(TEXT, [(5, 6)]) == {CAT}
    assert covered_tokens(TEXT, [(6, 9)]) == {CAT, SAT}
    assert covered_tokens(TEXT, [(3, 4)]) == set()  # only the space between "The" and "cat"
    assert covered_tokens(TEXT, [(22, 23)]) == set()  # only the full stop
    assert covered_tokens(TEXT, [(0, 23)]) == set(range(6))


def test_overlapping_and_adjacent_spans_merge():
    assert covered_tokens(TEXT, [(4, 9), (6, 11), (11, 14)]) == {CAT, SAT, ON}


def test_token_f1_between_two_annotators_hand_worked():
    """First marks "cat sat" (2 tokens), second "sat on the mat" (4 tokens); they share "sat":
    precision 1/2, recall 1/4, F1 = 2 * 1 / (2 + 4) = 1/3, whichever is taken as reference."""
    assert span_token_f1(TEXT, [(4, 11)], [(8, 22)]) == pytest.approx(1 / 3)
    assert span_token_f1(TEXT, [(8, 22)], [(4, 11)]) == pytest.approx(1 / 3)
    assert span_token_f1(TEXT, [(4, 11)], [(4, 11)]) == 1.0
    assert span_token_f1(TEXT, [(0, 3)], [(19, 22)]) == 0.0


def test_empty_selections_follow_the_squad_convention():
    assert span_token_f1(TEXT, [], []) == 1.0
    assert span_token_f1(TEXT, [(22, 23)], []) == 1.0  # punctuation only marks no word
    assert span_token_f1(TEXT, [], [(0, 3)]) == 0.0


def test_exact_match_ignores_spaces_punctuation_and_how_a_selection_was_split():
    assert span_exact_match(TEXT, [(4, 11)], [(3, 12)])
    assert span_exact_match(TEXT, [(4, 7), (8, 11)], [(4, 11)])
    assert span_exact_match(TEXT, [(19, 23)], [(19, 22)])
    assert not span_exact_match(TEXT, [(4, 7)], [(4, 11)])
    assert span_exact_match(TEXT, [], [])


def test_mean_pairwise_span_f1_over_three_annotators():
    """A = C = "cat sat", B = "sat on the mat": F1(A, B) = F1(B, C) = 1/3, F1(A, C) = 1;
    mean (1/3 + 1 + 1/3) / 3 = 5/9."""
    assert mean_pairwise_span_f1(TEXT, [[(4, 11)], [(8, 22)], [(4, 7), (8, 11)]]) == pytest.approx(5 / 9)


def test_spans_may_come_from_json_lists_or_numpy_integers():
    assert span_token_f1(TEXT, [[4, 11]], [(np.int64(8), np.int64(22))]) == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("spans", "message"),
    [
        ([(4, 11), (9, 5)], r"span 1 \(9, 5\): needs 0 <= start < end <= 23"),
        ([(4, 4)], r"span 0 \(4, 4\): needs 0 <= start < end"),
        ([(-1, 3)], "span 0 .*needs 0 <= start"),
        ([(0, 24)], "the text's length"),
        ([(0.0, 3)], "span 0 .*pair of integer character offsets"),
        ([(True, 3)], "pair of integer character offsets"),
        ([(1, 2, 3)], "pair of integer character offsets"),
        ([4, 11], "span 0 4: must be a pair"),
    ],
)
def test_spans_outside_the_text_or_malformed_are_rejected(spans, message):
    with pytest.raises(ValueError, match=message):
        span_token_f1(TEXT, spans, [])


def test_span_agreement_needs_two_annotators():
    with pytest.raises(ValueError, match="at least two annotators, got 1"):
        mean_pairwise_span_f1(TEXT, [[(0, 3)]])


@st.composite
def text_and_span_sets(draw):
    text = draw(st.text(alphabet="ab .,'\n", min_size=1, max_size=40))
    span = st.integers(0, len(text) - 1).flatmap(
        lambda start: st.tuples(st.just(start), st.integers(start + 1, len(text)))
    )
    return text, draw(st.lists(span, max_size=4)), draw(st.lists(span, max_size=4))


def marked_characters(spans):
    return set(itertools.chain.from_iterable(range(start, end) for start, end in spans))


@settings(max_examples=300, deadline=None)
@given(text_and_span_sets())
def test_span_token_f1_is_the_f1_of_per_token_marks(case):
    """Reference: mark each token by checking its characters one by one, then scikit-learn's F1
    over tokens (zero_division=1 is the both-empty convention)."""
    text, first, second = case
    tokens = [range(match.start(), match.end()) for match in re.finditer(r"\w+", text)]
    first_chars, second_chars = marked_characters(first), marked_characters(second)
    first_marks = [bool(first_chars.intersection(token)) for token in tokens]
    second_marks = [bool(second_chars.intersection(token)) for token in tokens]
    assert covered_tokens(text, first) == {index for index, marked in enumerate(first_marks) if marked}
    expected = f1_score(first_marks, second_marks, zero_division=1.0) if tokens else 1.0
    assert span_token_f1(text, first, second) == pytest.approx(expected, abs=1e-12)
    assert span_token_f1(text, second, first) == pytest.approx(expected, abs=1e-12)
    assert span_exact_match(text, first, second) == (first_marks == second_marks)


# --- quote recommendation: predicted quote against the gold quote ------------------------------------------


def test_bag_of_words_is_lowercased_word_tokens():
    assert bag_of_words("Yes, we CAN -- can't we?") == ["yes", "we", "can", "can", "t", "we"]


def test_bow_f1_hand_worked():
    """Predicted "The cat sat" against gold "the cat sat on the mat": all 3 predicted words are in
    the gold, 3 of its 6 words are predicted: P = 1, R = 1/2, F1 = 2/3."""
    assert bow_f1("The cat sat", "the cat sat on the mat") == pytest.approx(2 / 3)


def test_bow_f1_counts_repeated_words_as_a_multiset():
    """ "the the the" against "the cat": overlap min(3, 1) = 1; P = 1/3, R = 1/2, F1 = 0.4."""
    assert bow_f1("the the the", "the cat") == pytest.approx(0.4)


def test_bow_f1_ignores_case_punctuation_and_word_order():
    assert bow_f1("Hello, World!", "hello world") == 1.0
    assert bow_f1("world hello", "hello world") == 1.0
    assert bow_f1("", "...") == 1.0
    assert bow_f1("", "a quote") == 0.0
    assert bow_f1("nothing shared", "a quote") == 0.0


def test_text_exact_match_needs_the_same_words_in_the_same_order():
    assert text_exact_match("  We choose to go to the Moon.", "we choose to go to the moon")
    assert not text_exact_match("the moon we choose", "we choose the moon")
    assert not text_exact_match("we choose to go", "we choose to go to the moon")
