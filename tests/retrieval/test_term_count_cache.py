"""A candidate set is tokenised once: its term counts are cached by content, so reruns with other
k1, b or context, and the first run after an import, only load them — with the same scores to
the last bit. Sets too small to be worth an archive (a BIRCO pool) are counted in place."""

import numpy as np
import pytest
from django.core.management import call_command

from retrieval import bm25
from retrieval.bm25 import BM25Index, BM25Scorer, TermCounts, cached_term_counts, term_counts_key, tokenize_all
from retrieval.models import Collection
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever, term_counts_folder
from tests.factories import write_beir_folder

TEXTS = ["The the Darcy proposes at Hunsford", "Elizabeth refuses him, the proud man", "", "Rain at Netherfield the"]
QUERIES = [["darcy", "the", "the"], ["rain"], ["absent"]]


@pytest.fixture
def cache_every_set(monkeypatch):
    """Sets of a few texts pin the cache's behaviour; the size rule has its own tests below."""
    monkeypatch.setattr(bm25, "SMALLEST_CACHED_SET", 1)


def cached_files() -> list:
    folder = term_counts_folder()
    return list(folder.glob("*.npz")) if folder.exists() else []


class Row:
    def __init__(self, text):
        self.retrieval_text = text


def test_cached_counts_give_bit_identical_scores_for_any_k1_and_b(tmp_path, cache_every_set):
    fresh = BM25Index(tokenize_all(TEXTS), k1=1.2, b=0.75).scores(QUERIES)
    cached_term_counts(TEXTS, tmp_path)  # counted and stored

    loaded = BM25Scorer(1.2, 0.75, cache_folder=tmp_path).index([Row(text) for text in TEXTS]).scores(QUERIES)

    assert np.array_equal(loaded, fresh)
    assert len(list(tmp_path.glob("*.npz"))) == 1


def test_a_second_use_of_the_same_texts_loads_instead_of_tokenising(tmp_path, cache_every_set, monkeypatch):
    cached_term_counts(TEXTS, tmp_path)
    monkeypatch.setattr(TermCounts, "from_tokens", lambda corpus: pytest.fail("tokenised again"))

    assert cached_term_counts(TEXTS, tmp_path).vocabulary[:3] == ["the", "darcy", "proposes"]


def test_the_key_follows_the_texts_and_their_order():
    assert term_counts_key(TEXTS) == term_counts_key(list(TEXTS))
    assert term_counts_key(TEXTS) != term_counts_key(TEXTS[::-1])
    assert term_counts_key(TEXTS) != term_counts_key([TEXTS[0] + "!", *TEXTS[1:]])
    assert term_counts_key(["ab", "c"]) != term_counts_key(["a", "bc"])


def test_an_unreadable_cache_file_is_counted_again_and_replaced(tmp_path, cache_every_set):
    path = tmp_path / f"{term_counts_key(TEXTS)}.npz"
    path.write_bytes(b"not a numpy archive")

    counts = cached_term_counts(TEXTS, tmp_path)

    assert counts.doc_lengths.tolist() == [6, 6, 0, 4]
    assert bm25.load_term_counts(path).vocabulary == counts.vocabulary


def test_without_a_folder_nothing_is_cached(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cached_term_counts(TEXTS, None)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.django_db
def test_an_import_counts_each_candidate_set_so_the_first_run_only_loads(tmp_path, cache_every_set, monkeypatch):
    folder = write_beir_folder(
        tmp_path / "beir",
        corpus=[
            {"_id": "p1", "text": "Darcy proposes"},
            {"_id": "p2", "text": "Elizabeth refuses"},
            {"_id": "p3", "text": "Rain falls"},
        ],
        queries=[{"_id": "q1", "text": "Darcy proposes"}, {"_id": "q2", "text": "rain"}],
        qrels=[("q1", "p1", 1), ("q2", "p3", 1)],
        pools={"q1": ["p1", "p2"], "q2": ["p2", "p3"]},
    )
    call_command("import_beir", str(folder), "--collection", "pooled")
    assert len(cached_files()) == 2  # one per pool

    monkeypatch.setattr(TermCounts, "from_tokens", lambda corpus: pytest.fail("tokenised again"))
    run = execute_run(create_run(Collection.objects.get(name="pooled"), get_or_create_retriever("bm25"), depth=2))
    assert run.hits.count() == 4 and run.query_results.count() == 2


def test_a_set_smaller_than_the_smallest_cached_is_counted_in_place(tmp_path):
    small = TEXTS * ((bm25.SMALLEST_CACHED_SET - 1) // len(TEXTS))
    assert cached_term_counts(small, tmp_path).doc_lengths.tolist() == [6, 6, 0, 4] * (len(small) // 4)
    assert list(tmp_path.iterdir()) == []

    large = TEXTS * (bm25.SMALLEST_CACHED_SET // len(TEXTS) + 1)
    cached_term_counts(large, tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1


@pytest.mark.django_db
def test_an_import_leaves_small_pools_to_the_run(tmp_path):
    folder = write_beir_folder(
        tmp_path / "beir",
        corpus=[{"_id": "p1", "text": "Darcy proposes"}, {"_id": "p2", "text": "Elizabeth refuses"}],
        queries=[{"_id": "q1", "text": "Darcy proposes"}],
        qrels=[("q1", "p1", 1)],
        pools={"q1": ["p1", "p2"]},
    )
    call_command("import_beir", str(folder), "--collection", "pooled")
    assert cached_files() == []

    run = execute_run(create_run(Collection.objects.get(name="pooled"), get_or_create_retriever("bm25"), depth=2))
    assert run.hits.count() == 2 and run.query_results.count() == 1
    assert cached_files() == []
