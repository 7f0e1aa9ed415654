"""Runs ranked elsewhere: stored in trec_eval's order (score, then docid descending), relevant
passages ranked exactly, not-retrieved ones counted, and nothing written on bad input."""

import math

import pytest

from retrieval.errors import InputError
from retrieval.metrics import trec_run_lines
from retrieval.models import Hit, Retriever, Run, RunQuery
from retrieval.services.external_runs import not_retrieved, save_ranked_run
from tests.factories import add_pool, add_qrels, make_collection, make_passages, make_query

pytestmark = pytest.mark.django_db


@pytest.fixture
def collection():
    collection = make_collection()
    passages = make_passages(collection, 6)
    first, second = make_query(collection, "q1"), make_query(collection, "q2")
    add_qrels(first, {passages[1]: 1, passages[4]: 2})
    add_qrels(second, {passages[0]: 1})
    make_query(collection, "q3")
    return collection


def passage(collection, external_id):
    return collection.passages.get(external_id=external_id)


def query(collection, external_id):
    return collection.queries.get(external_id=external_id)


def test_hits_follow_score_then_docid_descending_like_trec_eval(collection):
    p = {f"p{i}": passage(collection, f"p{i}") for i in range(6)}
    run = save_ranked_run(
        collection,
        name="ties",
        retriever="hand-made",
        rankings={query(collection, "q1"): [(p["p0"], 1.0), (p["p1"], 2.0), (p["p3"], 1.0), (p["p2"], 1.0)]},
    )
    ranked = list(Hit.objects.filter(run=run).order_by("rank").values_list("passage__external_id", "rank", "score"))
    assert ranked == [("p1", 1, 2.0), ("p3", 2, 1.0), ("p2", 3, 1.0), ("p0", 4, 1.0)]
    assert run.status == Run.Status.DONE and run.name == "ties"
    assert run.retriever.kind == Retriever.Kind.IMPORTED and run.parameters["depth"] == 4


def test_relevant_ranks_are_exact_and_unretrieved_ones_are_counted(collection):
    p = {f"p{i}": passage(collection, f"p{i}") for i in range(6)}
    run = save_ranked_run(
        collection,
        name="partial",
        retriever="bm25-elsewhere",
        rankings={
            query(collection, "q1").pk: [(p["p3"].pk, 0.9), (p["p1"].pk, 0.5)],
            query(collection, "q2").pk: [(p["p2"].pk, 3.0)],
        },
        parameters={"source": "test"},
    )
    results = {result.query.external_id: result for result in RunQuery.objects.filter(run=run)}
    assert results["q1"].relevant_ranks == {str(p["p1"].pk): 2} and results["q1"].gold_rank == 2
    assert results["q2"].relevant_ranks == {} and results["q2"].gold_rank is None
    assert results["q1"].candidates == 6  # the whole collection is q1's candidate set
    assert results["q3"].relevant_ranks == {}  # q3 was not ranked: it retrieved nothing
    assert not_retrieved(run) == 2  # p4 of q1, p0 of q2
    metrics = run.metrics["metrics"]
    assert metrics["recall@1"] == 0 and metrics["recall@3"] == pytest.approx(0.25)
    assert metrics["mean_rank"] == pytest.approx((2 + 7) / 2)  # q2's gold counts as candidates + 1
    assert run.parameters == {"source": "test", "depth": 2}


def test_a_pooled_query_counts_its_pool_as_candidates(collection):
    q2 = query(collection, "q2")
    add_pool(q2, list(collection.passages.all()[:3]))
    run = save_ranked_run(collection, name="pooled", retriever="x", rankings={q2: [(passage(collection, "p0"), 1.0)]})
    assert RunQuery.objects.get(run=run, query=q2).candidates == 3


def test_stored_run_exports_as_trec_lines(collection):
    p1 = passage(collection, "p1")
    run = save_ranked_run(collection, name="one", retriever="x", rankings={query(collection, "q1"): [(p1, 0.1)]})
    assert list(trec_run_lines(run)) == [f"q1 Q0 p1 1 0.1 marginalia-imported-{run.pk}"]


@pytest.mark.parametrize(
    ("rankings", "field"),
    [
        (lambda c: {query(c, "q1"): [(passage(c, "p1"), math.nan)]}, "score"),
        (lambda c: {query(c, "q1"): [(passage(c, "p1"), "high")]}, "score"),
        (lambda c: {query(c, "q1"): [(passage(c, "p1"), 1.0), (passage(c, "p1"), 0.5)]}, "passage"),
        (lambda c: {query(c, "q1"): [(10**9, 1.0)]}, "passage"),
        (lambda c: {10**9: [(passage(c, "p1"), 1.0)]}, "query"),
        (lambda c: {}, "rankings"),
    ],
)
def test_bad_rankings_are_refused_with_nothing_written(collection, rankings, field):
    with pytest.raises(InputError) as error:
        save_ranked_run(collection, name="bad", retriever="x", rankings=rankings(collection))
    assert error.value.field == field
    assert not Run.objects.exists() and not Hit.objects.exists()


def test_run_names_are_unique_per_collection(collection):
    ranking = {query(collection, "q1"): [(passage(collection, "p1"), 1.0)]}
    save_ranked_run(collection, name="mine", retriever="x", rankings=ranking)
    with pytest.raises(InputError) as error:
        save_ranked_run(collection, name="mine", retriever="x", rankings=ranking)
    assert error.value.field == "name" and Run.objects.count() == 1
    other = make_collection()
    make_passages(other, 2)
    make_query(other, "q1")
    save_ranked_run(other, name="mine", retriever="x", rankings={query(other, "q1"): [(passage(other, "p1"), 1.0)]})


def test_a_run_may_cover_only_some_queries(collection):
    q1 = query(collection, "q1")
    run = save_ranked_run(
        collection, name="subset", retriever="x", rankings={q1: [(passage(collection, "p1"), 1.0)]}, queries=[q1]
    )
    assert list(run.query_results.values_list("query__external_id", flat=True)) == ["q1"]
    with pytest.raises(InputError) as error:
        save_ranked_run(
            collection,
            name="outside",
            retriever="x",
            rankings={query(collection, "q2"): [(passage(collection, "p1"), 1.0)]},
            queries=[q1],
        )
    assert error.value.field == "query"
