"""BM25 (Okapi) that gives rank_bm25 0.2.2's `BM25Okapi.get_scores` to the last bit, much faster.

rank_bm25 is the reference the papers used, so our scores must equal it exactly: the same
average document length, the same idf (negative idfs, and only those, floored at epsilon x the
mean idf), repeated query tokens counted again, and every floating-point operation done in the
same order. What differs is the work skipped. Like bm25s, we precompute each (term, document)
entry's full contribution `idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))` once per
index, in a term -> documents CSR structure of plain numpy arrays (no scipy: importing it costs
more than indexing a small pool). A query then only adds contributions, token by token in query
order, as rank_bm25 does; rank_bm25's other additions are exact zeros, which change nothing.
Frequent terms (in at least 1/DENSE_FRACTION of the documents) keep their contributions as a dense
row, because adding a contiguous row costs less than scattering most of it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import itertools
import math
import operator
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import InputError
from .files import write_atomically

if TYPE_CHECKING:  # the index itself stays free of Django, so benchmarks can use it bare
    from jobs.progress import Progress
DEFAULT_K1 = 0.5
DEFAULT_B = 0.9
DEFAULT_EPSILON = 0.25
# A term found in at least 1 / DENSE_FRACTION of the documents is stored as a dense row.
DENSE_FRACTION = 8
# Candidate sets with fewer texts are counted in place, never cached (see worth_caching).
SMALLEST_CACHED_SET = 128

_TOKEN = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """The tokenisation RELiC's BM25 baseline used: lower-cased runs of word characters."""
    return _TOKEN.findall(text.lower())


def tokenize_all(texts: Iterable[str]) -> list[list[str]]:
    """`[tokenize(text) for text in texts]` without a Python-level call per text (index building
    is dominated by tokenising)."""
    return list(map(_TOKEN.findall, map(str.lower, texts)))


def validate_parameters(k1: float, b: float) -> None:
    """k1 > 0 and 0 <= b <= 1: outside that range BM25 is undefined (rank_bm25 returns NaN)."""
    if not (isinstance(k1, (int, float)) and math.isfinite(k1) and k1 > 0):
        raise InputError(f"must be a positive number, got {k1!r}", field="k1")
    if not (isinstance(b, (int, float)) and 0 <= b <= 1):
        raise InputError(f"must be between 0 and 1, got {b!r}", field="b")


@dataclass(frozen=True)
class TermRows:
    """A terms x documents sparse matrix in CSR form: term t's documents are
    `indices[indptr[t]:indptr[t + 1]]` (ascending) and their values the same slice of `data`."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    def document_frequencies(self) -> np.ndarray:
        return np.diff(self.indptr)

    def with_data(self, data: np.ndarray) -> TermRows:
        return TermRows(self.indptr, self.indices, data, self.shape)


def stable_term_order(term_ids: np.ndarray) -> np.ndarray:
    """`np.argsort(term_ids, kind="stable")` for ids below 2**32, as one or two passes of
    numpy's radix sort on 16-bit digits (numpy sorts wider integers stably with timsort, which
    costs several times more than counting)."""
    order = np.argsort(term_ids.astype(np.uint16), kind="stable")
    if term_ids.size and int(term_ids.max()) > 0xFFFF:
        order = order[np.argsort((term_ids[order] >> 16).astype(np.uint16), kind="stable")]
    return order


@dataclass(frozen=True)
class TermCounts:
    """A tokenised candidate set: what BM25 needs of it whatever k1 and b are, so it can be
    computed once and cached (see `cached_term_counts`)."""

    vocabulary: list[str]  # in order of first occurrence: rank_bm25 sums idfs in that order
    counts: TermRows  # terms x documents, term frequencies
    doc_lengths: np.ndarray  # tokens per document

    @classmethod
    def from_tokens(cls, corpus: Sequence[Sequence[str]]) -> TermCounts:
        tokens = list(itertools.chain.from_iterable(corpus))
        vocabulary = dict(zip(dict.fromkeys(tokens), itertools.count()))
        term_ids = np.fromiter(map(vocabulary.__getitem__, tokens), dtype=np.int64, count=len(tokens))
        doc_lengths = np.fromiter(map(len, corpus), dtype=np.int64, count=len(corpus))
        doc_of_token = np.repeat(np.arange(len(corpus), dtype=np.int64), doc_lengths)
        # Tokens come in document order, so a stable sort by term leaves each term's documents
        # ascending: a repeated (term, document) pair is a run of equal neighbours, its length
        # the term frequency. A counting (radix) sort is linear where sorting the pairs was not.
        order = stable_term_order(term_ids)
        terms, documents = term_ids[order], doc_of_token[order]
        first = np.ones(len(terms), dtype=bool)
        np.not_equal(terms[1:], terms[:-1], out=first[1:])
        first[1:] |= documents[1:] != documents[:-1]
        starts = np.flatnonzero(first)
        frequencies = np.diff(starts, append=len(terms))
        terms, documents = terms[starts], documents[starts]
        indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=len(vocabulary)), out=indptr[1:])
        counts = TermRows(indptr, documents, frequencies.astype(np.float64), (len(vocabulary), len(corpus)))
        return cls(list(vocabulary), counts, doc_lengths)


@contextlib.contextmanager
def garbage_collection_paused():
    """Tokenising a corpus allocates one list per passage and a string per token, which sets off
    the cyclic garbage collector again and again to walk every live object of the process (a
    third of the indexing time in a Django worker); none of these objects form cycles."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Part of every cache key: a change to tokenize() must not meet counts made by the old rule.
TOKENIZER_VERSION = b"lower-\\w+-1"


def term_counts_key(texts: Sequence[str]) -> str:
    """A content address for a candidate set's texts, in order (order fixes the vocabulary's)."""
    digest = hashlib.sha256(TOKENIZER_VERSION)
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\x1f")
    return digest.hexdigest()


def load_term_counts(path: Path) -> TermCounts | None:
    """The cached counts at `path`, or None when missing or unreadable (then they are rebuilt)."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            vocabulary = bytes(stored["vocabulary"]).decode("utf-8")
            shape = tuple(int(size) for size in stored["shape"])
            counts = TermRows(stored["indptr"], stored["indices"], stored["data"], shape)
            doc_lengths = stored["doc_lengths"]
    except (OSError, KeyError, ValueError):
        return None
    terms = vocabulary.split("\n") if vocabulary else []
    if len(counts.indptr) != len(terms) + 1 or len(doc_lengths) != shape[1] or shape[0] != len(terms):
        return None
    return TermCounts(terms, counts, doc_lengths)


def save_term_counts(term_counts: TermCounts, file) -> None:
    # Terms never contain a newline (\w+), so one joined UTF-8 string holds the vocabulary
    # without numpy's fixed-width strings (one long term would pad every other).
    vocabulary = np.frombuffer("\n".join(term_counts.vocabulary).encode("utf-8"), dtype=np.uint8)
    counts = term_counts.counts
    np.savez(
        file,
        vocabulary=vocabulary,
        data=counts.data,
        indices=counts.indices,
        indptr=counts.indptr,
        shape=np.array(counts.shape),
        doc_lengths=term_counts.doc_lengths,
    )


def worth_caching(size: int) -> bool:
    """Whether a candidate set of `size` texts is worth caching: reading a small archive costs more
    than counting a small pool (a BIRCO pool of 50 passages: 0.6 ms to count, 1 ms to load)."""
    return size >= SMALLEST_CACHED_SET


def cached_term_counts(texts: Sequence[str], folder: Path | None) -> TermCounts:
    """The texts' term counts: read from `folder` when this exact candidate set was tokenised
    before (a rerun with other k1/b or context, or a run after the import warmed the cache),
    otherwise counted and, with a folder, stored for next time. No folder, or a set too small to
    be worth caching: counted in place."""
    path = folder / f"{term_counts_key(texts)}.npz" if folder is not None and worth_caching(len(texts)) else None
    if path is not None and (cached := load_term_counts(path)) is not None:
        return cached
    with garbage_collection_paused():
        term_counts = TermCounts.from_tokens(tokenize_all(texts))
    if path is not None:
        write_atomically(path, lambda file: save_term_counts(term_counts, file), binary=True)
    return term_counts


class BM25Index:
    """An index over one candidate set (a list of token lists, one per passage).

    Documents where `k1 * (1 - b + b * dl / avgdl)` is zero (empty documents when b = 1) get
    score 0 here where rank_bm25 divides 0 by 0 and returns NaN; everything else is identical.
    """

    def __init__(
        self,
        corpus: Sequence[Sequence[str]],
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        epsilon: float = DEFAULT_EPSILON,
    ):
        self._build(TermCounts.from_tokens(corpus), k1, b, epsilon)

    @classmethod
    def from_counts(
        cls, term_counts: TermCounts, k1: float = DEFAULT_K1, b: float = DEFAULT_B, epsilon: float = DEFAULT_EPSILON
    ) -> BM25Index:
        """The index of an already tokenised candidate set (e.g. from the term-count cache)."""
        index = cls.__new__(cls)
        index._build(term_counts, k1, b, epsilon)
        return index

    def _build(self, term_counts: TermCounts, k1: float, b: float, epsilon: float) -> None:
        validate_parameters(k1, b)
        self.k1, self.b, self.epsilon = float(k1), float(b), float(epsilon)
        self.size = len(term_counts.doc_lengths)
        self.vocabulary: dict[str, int] = dict(zip(term_counts.vocabulary, itertools.count()))
        self.avgdl = int(term_counts.doc_lengths.sum()) / self.size if self.size else 0.0
        self.idf = self._idf(term_counts.counts.document_frequencies())
        self.weights = self._weights(term_counts.counts, term_counts.doc_lengths)
        self._dense_rows = self._dense(self.weights)
        self._contributions: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}

    def _idf(self, document_frequency: np.ndarray) -> np.ndarray:
        """rank_bm25's idf: log(N - n + 0.5) - log(n + 0.5), negatives floored at eps x mean."""
        frequencies, inverse = np.unique(document_frequency, return_inverse=True)
        n = self.size
        idf = np.array([math.log(n - f + 0.5) - math.log(f + 0.5) for f in frequencies.tolist()])[inverse]
        negative = idf < 0
        if negative.any():
            # A left-to-right sum like rank_bm25's loop (Python's sum() may compensate rounding).
            idf_sum = functools.reduce(operator.add, idf.tolist(), 0)
            idf[negative] = self.epsilon * (idf_sum / len(idf))
        return idf

    def _weights(self, counts: TermRows, doc_lengths: np.ndarray) -> TermRows:
        """Each (term, document) entry's full contribution, computed with rank_bm25's operations in
        rank_bm25's order: idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)))."""
        with np.errstate(invalid="ignore"):  # 0 / 0 when every document is empty (and no entry uses it)
            length_norm = self.k1 * (1 - self.b + self.b * doc_lengths.astype(np.float64) / self.avgdl)
        tf = counts.data
        term_of_entry = np.repeat(np.arange(counts.shape[0]), counts.document_frequencies())
        # tf >= 1 in every entry, so no denominator is zero here.
        return counts.with_data(self.idf[term_of_entry] * (tf * (self.k1 + 1) / (tf + length_norm[counts.indices])))

    def _dense(self, weights: TermRows) -> dict[int, np.ndarray]:
        """Full rows (zeros where a document lacks the term) of the frequent terms: adding a
        contiguous row is cheaper than scattering into most of the documents. Their total size is
        at most DENSE_FRACTION x the number of entries, so memory stays linear in the corpus."""
        frequent = np.flatnonzero(weights.document_frequencies() * DENSE_FRACTION >= max(1, self.size))
        rows = {}
        for term in frequent.tolist():
            row = np.zeros(self.size)
            entries = slice(weights.indptr[term], weights.indptr[term + 1])
            row[weights.indices[entries]] = weights.data[entries]
            rows[term] = row
        return rows

    def _contribution(self, token: str) -> tuple[np.ndarray, np.ndarray | None] | None:
        """(dense row, None) or (documents, contributions) of a token; None outside the vocabulary.
        Looked up once per index and token, so a query pays a dict lookup per token."""
        found = self._contributions.get(token)
        if found is None:
            term = self.vocabulary.get(token)
            if term is None:
                return None
            if term in self._dense_rows:
                found = (self._dense_rows[term], None)
            else:
                entries = slice(int(self.weights.indptr[term]), int(self.weights.indptr[term + 1]))
                found = (self.weights.indices[entries], self.weights.data[entries])
            self._contributions[token] = found
        return found

    def score_into(self, query: Sequence[str], scores: np.ndarray) -> None:
        """Add one query's scores to `scores` (zeros), rank_bm25's additions in rank_bm25's order.

        Each document's score receives, token by token in query order (repeats included, never
        merged), `score + contribution`: exactly rank_bm25's loop without its additions of zero.
        A dense row adds zeros where the term is absent, which changes nothing; `np.add.at`
        applies its updates one after another in the order given, so consecutive sparse tokens
        go in one call.
        """
        pending_documents: list[np.ndarray] = []
        pending_contributions: list[np.ndarray] = []
        for token in query:
            found = self._contribution(token)
            if found is None:
                continue
            documents, contributions = found
            if contributions is not None:
                pending_documents.append(documents)
                pending_contributions.append(contributions)
                continue
            if pending_documents:
                _scatter_add(scores, pending_documents, pending_contributions)
                pending_documents, pending_contributions = [], []
            np.add(scores, documents, out=scores)
        if pending_documents:
            _scatter_add(scores, pending_documents, pending_contributions)

    def scores(self, queries: Sequence[Sequence[str]]) -> np.ndarray:
        """Scores of shape (len(queries), size), equal to rank_bm25's get_scores per query. A
        batch costs the same per query as one query alone (the tests compare both bit for bit)."""
        scores = np.zeros((len(queries), self.size))
        for query, row in zip(queries, scores):
            self.score_into(query, row)
        return scores


def _scatter_add(scores: np.ndarray, documents: list[np.ndarray], contributions: list[np.ndarray]) -> None:
    if len(documents) == 1:
        np.add.at(scores, documents[0], contributions[0])
    else:
        np.add.at(scores, np.concatenate(documents), np.concatenate(contributions))


class BM25Scorer:
    """The `Scorer` for BM25 runs: one index per candidate set, built from the passages' text
    (their term counts cached in `cache_folder` when given). A run scores a large set's queries
    in batches, so the last set's index is kept."""

    mask_token = None

    def __init__(self, k1: float = DEFAULT_K1, b: float = DEFAULT_B, cache_folder: Path | None = None):
        validate_parameters(k1, b)
        self.k1, self.b, self.cache_folder = k1, b, cache_folder
        self._indexed: tuple[Sequence, BM25Index] | None = None

    def index(self, passages: Sequence) -> BM25Index:
        if self._indexed is None or self._indexed[0] is not passages:
            term_counts = cached_term_counts([passage.retrieval_text for passage in passages], self.cache_folder)
            self._indexed = (passages, BM25Index.from_counts(term_counts, self.k1, self.b))
        return self._indexed[1]

    def prepare(self, queries: list[str], passages: Sequence, progress: Progress) -> None:
        """Nothing to do ahead: a query costs the same alone as in a batch."""

    def score(self, queries: list[str], passages: Sequence, progress: Progress) -> np.ndarray:
        return self.index(passages).scores(tokenize_all(queries))
