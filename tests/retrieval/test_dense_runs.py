"""A dense run over per-query pools (BIRCO) encodes every query once and every passage once, in
batches across the pools, instead of one small batch per pool: the rankings and the embeddings
are those of sentence-transformers applied pool by pool (today's path, as the papers ran it),
and a run whose passages are cached encodes its queries only."""

import json

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from retrieval import dense
from retrieval.dense import default_model
from retrieval.models import Hit, RunQuery
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.factories import call_json_command

pytestmark = [pytest.mark.django_db, pytest.mark.data]

# Six pools (304 passages, each encoded by the platform and by the reference): every path a
# pool-by-pool comparison needs; twelve doubled the encoding, 30 s per test on two cores.
POOLS = 6


@pytest.fixture(scope="module")
def reference_model() -> SentenceTransformer:
    return SentenceTransformer(default_model(), device="cpu", local_files_only=True)


@pytest.fixture
def birco(shared_data, tmp_path):
    """The first POOLS queries of BIRCO's RELiC dev set with their pools, imported as BEIR."""
    source = shared_data / "birco-relic-dev"

    def rows(name: str) -> list[dict]:
        return [json.loads(line) for line in (source / name).read_text(encoding="utf-8").splitlines() if line.strip()]

    pools = {row["query-id"]: row["corpus-ids"] for row in rows("pools.jsonl")[:POOLS]}
    pooled = {passage for pool in pools.values() for passage in pool}
    folder = tmp_path / "birco"
    folder.mkdir()
    corpus = [row for row in rows("corpus.jsonl") if row["_id"] in pooled]
    queries = [row for row in rows("queries.jsonl") if row["_id"] in pools]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries))
    qrels = [line for line in (source / "qrels.tsv").read_text().splitlines()[1:] if line.split("\t")[0] in pools]
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    (folder / "pools.jsonl").write_text(
        "".join(json.dumps({"query-id": q, "corpus-ids": p}) + "\n" for q, p in pools.items())
    )
    call_json_command("import_beir", folder, "--collection", "birco")
    return {"corpus": {row["_id"]: row["text"] for row in corpus}, "queries": queries, "pools": pools}


@pytest.fixture
def encode_calls(monkeypatch):
    """(label, number of texts) of every call to the dense encoder."""
    calls = []
    real_encode = dense.encode

    def counting(model, texts, **kwargs):
        calls.append((kwargs.get("label"), len(texts)))
        return real_encode(model, texts, **kwargs)

    monkeypatch.setattr(dense, "encode", counting)
    return calls


def test_a_run_over_per_query_pools_ranks_as_sentence_transformers_pool_by_pool(birco, encode_calls, reference_model):
    run = call_json_command("retrieve", "--collection", "birco", "--retriever", "dense", "--depth", 100)

    passages = len({passage for pool in birco["pools"].values() for passage in pool})
    assert encode_calls == [("queries", POOLS), ("passages", passages)]  # one call each, across pools
    for query in birco["queries"]:
        pool = birco["pools"][query["_id"]]
        vectors = reference_model.encode([birco["corpus"][passage] for passage in pool], batch_size=64)
        scores = vectors @ reference_model.encode([query["text"]])[0]
        expected = sorted(zip(scores.tolist(), pool), reverse=True)  # score, then id, descending
        stored = list(
            Hit.objects.filter(run_id=run["run_id"], query__external_id=query["_id"])
            .order_by("rank")
            .values_list("passage__external_id", "score")
        )
        assert [passage for passage, _ in stored] == [passage for _, passage in expected]
        np.testing.assert_allclose([score for _, score in stored], [score for score, _ in expected], atol=1e-5)
    gold_ranks = dict(RunQuery.objects.filter(run_id=run["run_id"]).values_list("query__external_id", "gold_rank"))
    assert len(gold_ranks) == POOLS and all(rank >= 1 for rank in gold_ranks.values())


def test_the_cached_embeddings_are_sentence_transformers_and_a_cached_run_encodes_only_its_queries(
    birco, encode_calls, reference_model
):
    from retrieval.models import Collection

    collection = Collection.objects.get(name="birco")
    first = execute_run(create_run(collection, get_or_create_retriever("dense")))
    encode_calls.clear()

    second = execute_run(create_run(collection, get_or_create_retriever("dense")))

    assert encode_calls == [("queries", POOLS)]
    first_hits = list(Hit.objects.filter(run=first).order_by("query_id", "rank").values_list("passage_id", "score"))
    second_hits = list(Hit.objects.filter(run=second).order_by("query_id", "rank").values_list("passage_id", "score"))
    assert first_hits == second_hits
    scorer = dense.DenseScorer(second.retriever)
    passages = list(collection.passages.order_by("ordinal"))
    cached = scorer.cache.embeddings(passages, lambda texts: pytest.fail("encoded again"))
    expected = reference_model.encode([passage.text for passage in passages], batch_size=64)
    np.testing.assert_allclose(cached, expected, atol=1e-5)
