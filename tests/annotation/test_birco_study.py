"""A proxy study over real data: BIRCO's RELiC dev split (queries whose text holds the masked
quotation and its context, each with its own pool), negatives from a BM25 run."""

import json

import pytest

from annotation.selectors import study_export_rows
from annotation.services import create_proxy_study
from retrieval.models import Collection, Run
from tests.factories import api_client, call_json_command, make_annotator

pytestmark = [pytest.mark.django_db, pytest.mark.data]


@pytest.fixture
def birco_study(shared_data):
    folder = shared_data / "birco-relic-dev"
    call_json_command("import_beir", folder, "--collection", "birco-relic-dev")
    run_id = call_json_command("retrieve", "--collection", "birco-relic-dev", "--retriever", "bm25", "--depth", 100)[
        "run_id"
    ]
    collection = Collection.objects.get(name="birco-relic-dev")
    creation = create_proxy_study(
        name="birco", collection=collection, negatives_run=Run.objects.get(pk=run_id), items=50, seed=7
    )
    return creation, folder


def test_every_birco_query_becomes_an_item_with_near_top_negatives(birco_study):
    creation, folder = birco_study
    assert creation.items == 50 and creation.skipped == []
    gold = {}
    for line in (folder / "qrels.tsv").read_text().splitlines()[1:]:
        query, passage, score = line.split("\t")
        if int(score) > 0:
            gold[query] = passage
    for row in study_export_rows(creation.study):
        assert row["gold"] == gold[row["query"]]
        assert len(set(row["candidates"])) == 3
        ranks = [row["sources"][c]["rank"] for c in row["candidates"] if c != row["gold"]]
        assert all(rank <= 10 for rank in ranks), row  # skipping near-duplicates costs little depth


def test_the_annotator_sees_the_query_text_and_no_birco_ids(birco_study):
    creation, _ = birco_study
    client = api_client(make_annotator())
    response = client.get(f"/api/annotate/{creation.study.pk}/next/")
    payload = response.json()
    item = creation.study.items.get(pk=payload["item"])
    assert payload["query_text"] == item.query.text and "[masked sentence(s)]" in payload["query_text"]
    assert payload["context_left"] == payload["context_right"] == []
    body = response.content.decode()
    for candidate in item.candidates.select_related("passage"):
        assert json.dumps(candidate.passage.external_id) not in body
    assert json.dumps(item.query.external_id) not in body
