"""BM25 is rank_bm25 0.2.2's BM25Okapi to the last bit (the RELiC baseline), only faster."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from retrieval.bm25 import BM25Index, BM25Scorer, tokenize
from retrieval.errors import InputError

# A small alphabet makes shared terms, terms in most documents (negative idf) and repeats common.
WORDS = st.sampled_from(["a", "b", "c", "d", "e", "f", "the", "of", "elizabeth", "darcy"])
DOCUMENTS = st.lists(st.lists(WORDS, max_size=12), min_size=1, max_size=25).filter(
    lambda corpus: any(corpus)  # rank_bm25 divides by zero on a corpus without a single token
)
QUERIES = st.lists(st.lists(st.one_of(WORDS, st.just("absent")), max_size=15), min_size=1, max_size=5)


def reference_scores(corpus, queries, k1, b):
    bm25 = BM25Okapi(corpus, k1=k1, b=b)
    return np.array([bm25.get_scores(query) for query in queries])


@settings(max_examples=300, deadline=None)
@given(
    corpus=DOCUMENTS,
    queries=QUERIES,
    k1=st.sampled_from([0.5, 1.2, 1.5, 2.0]),
    b=st.sampled_from([0.0, 0.5, 0.75, 0.9]),
)
def test_scores_equal_rank_bm25_bit_for_bit(corpus, queries, k1, b):
    ours = BM25Index(corpus, k1=k1, b=b).scores(queries)
    assert np.array_equal(ours, reference_scores(corpus, queries, k1, b))


@settings(max_examples=100, deadline=None)
@given(corpus=DOCUMENTS.filter(lambda corpus: all(corpus)), queries=QUERIES)
def test_b_of_one_matches_when_no_document_is_empty(corpus, queries):
    assert np.array_equal(BM25Index(corpus, k1=0.5, b=1.0).scores(queries), reference_scores(corpus, queries, 0.5, 1.0))


def test_negative_idf_terms_are_floored_at_epsilon_times_the_mean_idf():
    corpus = [["the", "a"], ["the", "b"], ["the", "c"], ["d"]]
    index = BM25Index(corpus, k1=0.5, b=0.9)
    reference = BM25Okapi(corpus, k1=0.5, b=0.9)
    assert reference.idf["the"] == pytest.approx(0.25 * reference.average_idf)
    assert index.idf[index.vocabulary["the"]] == reference.idf["the"]
    assert np.array_equal(index.scores([["the", "the", "a"]])[0], reference.get_scores(["the", "the", "a"]))


def test_repeated_query_tokens_count_again():
    index = BM25Index([["darcy", "pride"], ["elizabeth"], ["bennet"]])
    once, twice = index.scores([["darcy"], ["darcy", "darcy"]])
    assert twice[0] == 2 * once[0] > 0
    assert twice[1] == twice[2] == 0


def test_single_document_and_empty_documents():
    assert np.array_equal(BM25Index([["x", "y"]]).scores([["x"]]), reference_scores([["x", "y"]], [["x"]], 0.5, 0.9))
    corpus = [[], ["x"], []]
    assert np.array_equal(BM25Index(corpus).scores([["x"], []]), reference_scores(corpus, [["x"], []], 0.5, 0.9))


def test_degenerate_inputs_give_zero_scores_instead_of_errors():
    assert BM25Index([]).scores([["x"]]).shape == (1, 0)
    assert np.array_equal(BM25Index([[], []]).scores([["x"]]), np.zeros((1, 2)))
    assert BM25Index([["x"]]).scores([]).shape == (0, 1)


def test_tokens_are_lowercased_runs_of_word_characters():
    assert tokenize("Mr. Darcy's  pride—and_prejudice, 1813!") == ["mr", "darcy", "s", "pride", "and_prejudice", "1813"]
    assert tokenize("Élise ÉTAIT là") == ["élise", "était", "là"]


@pytest.mark.parametrize(
    "k1, b, field", [(0, 0.9, "k1"), (-1, 0.9, "k1"), (float("nan"), 0.9, "k1"), (0.5, 1.5, "b"), (0.5, -0.1, "b")]
)
def test_parameters_outside_bm25s_range_are_rejected_naming_the_field(k1, b, field):
    with pytest.raises(InputError) as error:
        BM25Scorer(k1, b)
    assert error.value.field == field


class TextPassage:
    def __init__(self, text, title=""):
        self.text, self.title = text, title

    @property
    def retrieval_text(self):
        return f"{self.title} {self.text}".strip() if self.title else self.text


def test_scorer_indexes_title_and_text_and_reuses_the_index_for_the_same_passages():
    passages = [TextPassage("It is a truth universally acknowledged"), TextPassage("a single man", title="Darcy")]
    scorer = BM25Scorer()
    scores = scorer.score(["darcy man", "truth"], passages, lambda fraction, message: None)
    corpus = [tokenize(passage.retrieval_text) for passage in passages]
    assert np.array_equal(scores, reference_scores(corpus, [["darcy", "man"], ["truth"]], 0.5, 0.9))
    index = scorer.index(passages)
    scorer.score(["truth"], passages, lambda fraction, message: None)
    assert scorer.index(passages) is index
    assert scorer.index(list(passages)) is not index
