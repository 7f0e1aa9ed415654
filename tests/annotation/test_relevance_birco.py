"""A relevance study over real data: BIRCO's RELiC dev split, pairs pooled from a BM25 run's top
10 and each query's own pool (BIRCO ranks within pools, so the run's hits are pool members)."""

import itertools
import json

import pytest

from annotation.selectors import pair_sources
from annotation.services import create_relevance_study, qrel_label
from retrieval.models import Collection, PoolEntry, Run
from tests.factories import api_client, call_json_command, make_annotator

pytestmark = [pytest.mark.django_db, pytest.mark.data]


@pytest.fixture
def birco_relevance(shared_data):
    call_json_command("import_beir", shared_data / "birco-relic-dev", "--collection", "birco-relic-dev")
    run_id = call_json_command("retrieve", "--collection", "birco-relic-dev", "--retriever", "bm25", "--depth", 100)[
        "run_id"
    ]
    collection = Collection.objects.get(name="birco-relic-dev")
    run = Run.objects.get(pk=run_id)
    return create_relevance_study(
        name="birco relevance",
        collection=collection,
        runs=[run],
        depth=10,
        use_pools=True,
        n_queries=4,
        seed=11,
    ), run


def test_the_pooled_pairs_are_each_querys_pool_once_with_its_one_positive(birco_relevance):
    creation, run = birco_relevance
    study = creation.study
    items = list(study.items.select_related("query").prefetch_related("candidates"))
    queries = {item.query for item in items}
    assert len(queries) == 4 and creation.skipped == []
    assert creation.items == PoolEntry.objects.filter(query__in=queries).count()
    pairs = [(item.query_id, item.candidates.get().passage_id) for item in items]
    assert len(set(pairs)) == len(pairs)
    for query in queries:
        labels = [qrel_label(item) for item in items if item.query == query]
        assert sorted(labels)[-2:] == [0, 1] and labels.count(1) == 1
    ranked = [source for _, sources in pair_sources(study) for source in sources if "run" in source]
    assert len(ranked) == 40 and all(source["run"] == run.pk and source["rank"] <= 10 for source in ranked)


def test_the_display_order_interleaves_queries_and_hides_birco_ids(birco_relevance):
    creation, _ = birco_relevance
    order = list(creation.study.items.values_list("query_id", flat=True))
    blocks = sum(1 for before, after in itertools.pairwise(order) if before != after)
    assert blocks > 10  # not one query after another (BIRCO's pool order ends with the positive)
    client = api_client(make_annotator())
    response = client.get(f"/api/annotate/{creation.study.pk}/next/")
    item = creation.study.items.get(pk=response.json()["item"])
    body = response.content.decode()
    assert json.dumps(item.candidates.get().passage.external_id) not in body
    assert json.dumps(item.query.external_id) not in body
