"""The data manager's tables of a run's queries and a collection's queries: filters, sort,
search, jump, the detail pages (a query's ranking with qrels and human judgments beside it) and
the exports of a selection, which write the shapes the existing exports write (TREC run file,
`export_run --ranks`, /api/queries/). On a real BM25 run over a small BEIR-style collection."""

import csv
import io
import json

import pytest

from annotation.services import create_relevance_study, void_judgment
from retrieval.models import Hit, PoolEntry, Query, RunQuery
from retrieval.selectors import relevant_rank_lines, trec_run_lines
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.annotation.test_attacks import session_client
from tests.factories import (
    add_label_judgment,
    api_client,
    make_annotator,
    make_label_collection,
    make_text_query,
    make_user,
)

pytestmark = pytest.mark.django_db


class World:
    """Five queries q0..q4 (each with one relevant passage d<i>) and an unjudged q5 in split
    "dev", ranked by BM25 to depth 3 over 8 passages; a relevance study on q0 and q1's top 2,
    where two annotators labelled q0's pairs; q2 carries a pool."""

    def __init__(self):
        self.staff = make_user("curator", staff=True)
        self.collection = make_label_collection(n_queries=5, n_passages=8)
        extra = make_text_query(self.collection, "Query number 5 is not judged by anyone.", external_id="q5")
        Query.objects.filter(pk=extra.pk).update(split="dev", ordinal=5)
        for ordinal, name in enumerate(["q0", "q1", "q2", "q3", "q4"]):
            Query.objects.filter(collection=self.collection, external_id=name).update(ordinal=ordinal)
        self.run = execute_run(create_run(self.collection, get_or_create_retriever("bm25"), depth=3))
        self.queries = {q.external_id: q for q in Query.objects.filter(collection=self.collection)}
        PoolEntry.objects.create(query=self.queries["q2"], passage=self.collection.passages.first(), position=0)
        self.study = create_relevance_study(
            name="pairs", collection=self.collection, runs=[self.run], depth=2, queries=["q0", "q1"], seed=1
        ).study
        self.people = [make_annotator("ada"), make_annotator("ben")]
        for item in self.study.items.filter(query__external_id="q0"):
            for person, label in zip(self.people, (1, 0)):
                add_label_judgment(item, person, label)

    def rows(self, kind: str, **params) -> list[str]:
        owner = self.run.pk if kind == "runs" else self.collection.pk
        response = api_client(self.staff).get(f"/api/{kind}/{owner}/data/queries/", params)
        assert response.status_code == 200, response.json()
        return [row["external_id"] for row in response.json()["results"]]

    def result(self, name: str) -> RunQuery:
        return RunQuery.objects.get(run=self.run, query=self.queries[name])


@pytest.fixture
def world():
    return World()


def test_the_run_table_lists_each_query_with_its_result(world):
    rows = api_client(world.staff).get(f"/api/runs/{world.run.pk}/data/queries/").json()["results"]
    assert [row["external_id"] for row in rows] == ["q0", "q1", "q2", "q3", "q4", "q5"]
    by_name = {row["external_id"]: row for row in rows}
    for name, row in by_name.items():
        result = world.result(name)
        assert (row["candidates"], row["best_rank"], row["relevant"]) == (
            result.candidates,
            result.gold_rank,
            len(result.relevant_ranks),
        )
        assert row["hits"] == Hit.objects.filter(run=world.run, query=world.queries[name]).count()
    assert by_name["q0"]["judgments"] == 2 * world.study.items.filter(query__external_id="q0").count()
    assert by_name["q5"]["relevant"] == 0 and by_name["q5"]["best_rank"] is None


def test_each_run_filter_and_sort(world):
    ranks = {name: world.result(name).gold_rank for name in world.queries}
    found = sorted((name for name, rank in ranks.items() if rank is not None), key=lambda n: (ranks[n], n))
    assert world.rows("runs", relevant="no") == ["q5"]
    assert world.rows("runs", relevant="yes") == ["q0", "q1", "q2", "q3", "q4"]
    assert world.rows("runs", max_rank=1) == [name for name in ["q0", "q1", "q2", "q3", "q4"] if ranks[name] == 1]
    assert world.rows("runs", min_rank=2) == [
        name for name in ["q0", "q1", "q2", "q3", "q4"] if (ranks[name] or 0) >= 2
    ]
    assert world.rows("runs", split="dev") == ["q5"]
    assert world.rows("runs", judged="yes") == ["q0"]
    assert world.rows("runs", judged="no") == ["q1", "q2", "q3", "q4", "q5"]
    assert world.rows("runs", search="not judged") == ["q5"]
    assert world.rows("runs", search="Q3") == ["q3"]
    by_rank = sorted(found, key=lambda n: (ranks[n], world.queries[n].ordinal))
    assert [name for name in world.rows("runs", sort="rank") if ranks[name] is not None] == by_rank
    assert world.rows("runs", sort="rank")[-1] == "q5"  # no relevant passage: last either way
    assert world.rows("runs", sort="-rank")[-1] == "q5"
    for params, field in (
        ({"relevant": "maybe"}, "relevant"),
        ({"min_rank": "0"}, "min_rank"),
        ({"sort": "x"}, "sort"),
    ):
        response = api_client(world.staff).get(f"/api/runs/{world.run.pk}/data/queries/", params)
        assert response.status_code == 400 and field in response.json()


def test_a_querys_ranking_shows_qrels_and_human_judgments_beside_each_passage(world):
    q0 = world.queries["q0"]
    detail = api_client(world.staff).get(f"/api/runs/{world.run.pk}/data/queries/{q0.pk}/").json()
    hits = list(Hit.objects.filter(run=world.run, query=q0).order_by("rank").select_related("passage"))
    assert [(entry["rank"], entry["passage"], entry["score"]) for entry in detail["ranking"]] == [
        (hit.rank, hit.passage.external_id, hit.score) for hit in hits
    ]
    assert detail["ranking"][0]["passage"] == "d0" and detail["ranking"][0]["qrel"] == 1
    assert [entry["qrel"] for entry in detail["ranking"][1:]] == [None] * (len(hits) - 1)
    summary = "ada: 1 · Relevant, ben: 0 · Not relevant"
    judged = [entry for entry in detail["ranking"] if entry["judgments"]]
    assert len(judged) == 2  # the study took the top 2
    for entry in judged:
        assert [(said["study_name"], said["summary"]) for said in entry["judgments"]] == [("pairs", summary)]
    page = session_client(world.staff).get(f"/runs/{world.run.pk}/queries/{q0.pk}/").content.decode()
    assert summary in page and f"/studies/{world.study.pk}/data/items/" in page
    missing = world.queries["q5"]
    RunQuery.objects.filter(run=world.run, query=missing).delete()
    assert api_client(world.staff).get(f"/api/runs/{world.run.pk}/data/queries/{missing.pk}/").status_code == 404


def test_relevant_passages_past_the_stored_depth_are_listed_with_their_exact_rank(world):
    q = world.queries["q3"]
    result = world.result("q3")
    relevant_id = next(iter(result.relevant_ranks))
    RunQuery.objects.filter(pk=result.pk).update(relevant_ranks={relevant_id: 7}, gold_rank=7)
    Hit.objects.filter(run=world.run, query=q, passage_id=int(relevant_id)).delete()
    detail = api_client(world.staff).get(f"/api/runs/{world.run.pk}/data/queries/{q.pk}/").json()
    assert [(entry["rank"], entry["qrel"]) for entry in detail["relevant_beyond_depth"]] == [(7, 1)]


def test_run_jump_by_position_or_external_id(world):
    client = api_client(world.staff)
    assert client.get(f"/api/runs/{world.run.pk}/data/jump/", {"jump": 2}).json()["external_id"] == "q1"
    assert (
        client.get(f"/api/runs/{world.run.pk}/data/jump/", {"jump": "q4", "jump_by": "query"}).json()["external_id"]
        == "q4"
    )
    assert client.get(f"/api/runs/{world.run.pk}/data/jump/", {"jump": 9}).status_code == 400
    page = session_client(world.staff).get(f"/runs/{world.run.pk}/queries/jump/", {"jump": "q2", "jump_by": "query"})
    assert page["Location"] == f"/runs/{world.run.pk}/queries/{world.queries['q2'].pk}/"


def test_exporting_chosen_run_queries_writes_the_trec_and_ranks_lines_of_those_queries(world):
    chosen = [world.result("q1"), world.result("q3")]
    names = {"q1", "q3"}
    full_trec = list(trec_run_lines(world.run))
    ids = ",".join(str(result.pk) for result in chosen)
    client = api_client(world.staff)
    trec = client.get(f"/api/runs/{world.run.pk}/data/export/", {"format": "trec", "items": ids})
    assert b"".join(trec.streaming_content).decode().splitlines() == [
        line for line in full_trec if line.split()[0] in names
    ]
    ranks = client.get(f"/api/runs/{world.run.pk}/data/export/", {"format": "ranks", "items": ids})
    assert [json.loads(line) for line in b"".join(ranks.streaming_content).decode().splitlines()] == [
        json.loads(line) for line in relevant_rank_lines(world.run) if json.loads(line)["query"] in names
    ]
    matching = session_client(world.staff).post(
        f"/runs/{world.run.pk}/queries/export/", {"format": "trec", "scope": "matching", "split": "dev"}
    )
    assert {line.split()[0] for line in b"".join(matching.streaming_content).decode().splitlines()} == {"q5"}


def test_each_collection_filter_sort_and_search(world):
    assert world.rows("collections") == ["q0", "q1", "q2", "q3", "q4", "q5"]
    assert world.rows("collections", qrels="no") == ["q5"]
    assert world.rows("collections", relevant="yes") == ["q0", "q1", "q2", "q3", "q4"]
    assert world.rows("collections", studied="yes") == ["q0", "q1"]
    assert world.rows("collections", pooled="yes") == ["q2"]
    assert world.rows("collections", split="dev", qrels="no") == ["q5"]
    assert world.rows("collections", search="number 4") == ["q4"]
    assert world.rows("collections", sort="-id") == ["q5", "q4", "q3", "q2", "q1", "q0"]
    rows = api_client(world.staff).get(f"/api/collections/{world.collection.pk}/data/queries/").json()["results"]
    first = rows[0]
    assert (first["qrels"], first["relevant"], first["items"], first["pool"]) == (
        1,
        1,
        world.study.items.filter(query__external_id="q0").count(),
        0,
    )


def test_a_collection_querys_detail_lists_qrels_study_items_and_runs(world):
    q0 = world.queries["q0"]
    detail = api_client(world.staff).get(f"/api/collections/{world.collection.pk}/data/queries/{q0.pk}/").json()
    assert [(entry["passage"], entry["relevance"]) for entry in detail["qrels"]] == [("d0", 1)]
    assert {entry["study_name"] for entry in detail["items"]} == {"pairs"}
    assert all(entry["judgments"] == 2 for entry in detail["items"])
    assert detail["runs"] == [
        {
            "run": world.run.pk,
            "retriever": world.run.retriever.name,
            "candidates": world.result("q0").candidates,
            "best_rank": world.result("q0").gold_rank,
        }
    ]
    # The items' stored live counts (annotation.services.live_counts), which a void keeps current.
    voided = world.study.items.filter(query=q0).order_by("position").first()
    void_judgment(voided.judgments.first(), by=world.staff, reason="duplicate account")
    detail = api_client(world.staff).get(f"/api/collections/{world.collection.pk}/data/queries/{q0.pk}/").json()
    assert {entry["item"]: entry["judgments"] for entry in detail["items"]} == {
        item.pk: 1 if item.pk == voided.pk else 2 for item in world.study.items.filter(query=q0)
    }
    other = make_label_collection(n_queries=1)
    foreign = Query.objects.get(collection=other)
    response = api_client(world.staff).get(f"/api/collections/{world.collection.pk}/data/queries/{foreign.pk}/")
    assert response.status_code == 404


def test_exporting_chosen_collection_queries_writes_the_query_apis_rows(world):
    chosen = [world.queries["q2"], world.queries["q5"]]
    listed = api_client(world.staff).get("/api/queries/", {"collection": world.collection.pk}).json()["results"]
    expected = [row for row in listed if row["external_id"] in {"q2", "q5"}]
    ids = ",".join(str(query.pk) for query in chosen)
    client = api_client(world.staff)
    as_json = client.get(f"/api/collections/{world.collection.pk}/data/export/", {"format": "json", "items": ids})
    assert json.loads(b"".join(as_json.streaming_content)) == expected
    as_csv = client.get(f"/api/collections/{world.collection.pk}/data/export/", {"format": "csv", "items": ids})
    rows = list(csv.DictReader(io.StringIO(b"".join(as_csv.streaming_content).decode())))
    assert [row["external_id"] for row in rows] == ["q2", "q5"] and json.loads(rows[0]["metadata"]) == {}
    page = session_client(world.staff).post(
        f"/collections/{world.collection.pk}/queries/export/", {"format": "jsonl", "scope": "matching", "pooled": "yes"}
    )
    assert [json.loads(line)["external_id"] for line in b"".join(page.streaming_content).decode().splitlines()] == [
        "q2"
    ]


def test_the_query_table_pages_render_with_their_filters(world):
    browser = session_client(world.staff)
    run_page = browser.get(f"/runs/{world.run.pk}/queries/", {"judged": "yes"}).content.decode()
    assert 'data-query="q0"' in run_page and 'data-query="q1"' not in run_page
    collection_page = browser.get(f"/collections/{world.collection.pk}/queries/", {"pooled": "yes"})
    assert collection_page.status_code == 200 and 'data-query="q2"' in collection_page.content.decode()
    refused = browser.get(f"/collections/{world.collection.pk}/queries/", {"pooled": "sometimes"})
    assert refused.status_code == 400 and "field &#x27;pooled&#x27;" in refused.content.decode()
