"""Real data end to end: Pride and Prejudice as a book collection, BIRCO's RELiC dev split with
its per-query pools, BM25 runs over both, and the metrics against the independent reference
computation in ../shared/checks/reference.py (rank_bm25 plus plain-Python metrics)."""

import importlib.util

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from retrieval.bm25 import tokenize
from retrieval.metrics import evaluate_run
from retrieval.models import Collection, Qrel, Query, RunQuery
from retrieval.services.importers import import_beir, import_book
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.conftest import require

pytestmark = [pytest.mark.data, pytest.mark.django_db]


def load_reference(shared_data):
    path = shared_data.parent / "checks" / "reference.py"
    require(path.is_file(), f"reference computations {path} are missing")
    spec = importlib.util.spec_from_file_location("marginalia_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pride_and_prejudice_windows_rank_exactly_like_rank_bm25(shared_data):
    summary = import_book(
        shared_data / "gutenberg" / "pride_and_prejudice.txt", title="Pride and Prejudice", author="Jane Austen"
    )
    collection = Collection.objects.get(name=summary["collection"])
    book = collection.documents.get()
    sentences = summary["sentences"]
    assert sentences > 5000
    assert summary["passages"] == {str(n): sentences - n + 1 for n in range(1, 6)}
    assert collection.passages.count() == sum(summary["passages"].values())
    assert book.sentences.count() == sentences
    # A quote of one sentence in the middle of the novel, with the sentences around it as context.
    texts = list(book.sentences.order_by("index").values_list("text", flat=True))
    gold_start = sentences // 2
    query = Query.objects.create(
        collection=collection,
        external_id="middle",
        document=book,
        quote_length=1,
        left_context=texts[gold_start - 4 : gold_start],
        right_context=texts[gold_start + 1 : gold_start + 5],
    )
    gold = collection.passages.get(document=book, length=1, start=gold_start)
    Qrel.objects.create(query=query, passage=gold, relevance=1)

    run = execute_run(create_run(collection, get_or_create_retriever("bm25", k1=0.5, b=0.9), depth=100))

    windows = list(collection.passages.filter(length=1).order_by("start").values_list("pk", "text", "external_id"))
    reference = BM25Okapi([tokenize(text) for _, text, _ in windows], k1=0.5, b=0.9).get_scores(
        tokenize(" ".join(texts[gold_start - 4 : gold_start] + texts[gold_start + 1 : gold_start + 5]))
    )
    # trec_eval's order: score descending, then id descending.
    order = sorted(range(len(windows)), key=lambda index: (reference[index], windows[index][2]), reverse=True)
    hits = list(run.hits.order_by("rank").values_list("passage_id", "score"))
    assert hits == [(windows[index][0], reference[index]) for index in order[:100]]
    gold_index = next(index for index, (pk, _, _) in enumerate(windows) if pk == gold.pk)
    assert RunQuery.objects.get(run=run).gold_rank == order.index(gold_index) + 1


def test_birco_relic_dev_bm25_metrics_equal_the_reference(shared_data):
    reference = load_reference(shared_data)
    folder = shared_data / "birco-relic-dev"
    summary = import_beir(folder, collection_name="birco-relic-dev")
    assert (summary["queries"], summary["passages"]) == (50, 2502)
    collection = Collection.objects.get(name="birco-relic-dev")

    run = execute_run(create_run(collection, get_or_create_retriever("bm25", k1=0.5, b=0.9), depth=100))
    report = evaluate_run(run)

    rankings, scores, qrels = reference.run_pools(folder, "bm25", k1=0.5, b=0.9)
    mean, stderr, count = reference.metrics_for(rankings, qrels)
    assert report["queries"] == count == 50
    for name, value in mean.items():
        assert report["metrics"][name] == pytest.approx(value, abs=1e-9), name
        assert report["stderr"][name] == pytest.approx(stderr[name], abs=1e-9), name
    stored = run.hits.values_list("query__external_id", "passage__external_id", "score")
    differences = [abs(score - scores[query][passage]) for query, passage, score in stored]
    assert len(differences) == sum(len(pool) for pool in scores.values())
    assert np.max(differences) == 0.0
