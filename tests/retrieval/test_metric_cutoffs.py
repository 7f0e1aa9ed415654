"""Metrics at any cutoff, in ir-measures naming, agree with ir-measures (pytrec_eval inside) to
1e-9 for every metric and cutoff, overall and per query, over the same queries (a query judged
only non-relevant counts as 0, one without judgments is left out); breakdowns by query fields."""

import io

import ir_measures
import pytest
from django.core.management import CommandError, call_command
from ir_measures import AP, RR, P, R, nDCG

from retrieval.errors import InputError
from retrieval.metrics import METRICS, parse_metrics
from retrieval.services.external_runs import save_ranked_run
from tests.factories import (
    add_qrels,
    api_client,
    call_json_command,
    make_annotator,
    make_collection,
    make_text_passages,
    make_text_query,
    make_user,
)

CUTOFFS = (1, 2, 3, 5, 10, 20, 100)
METRIC_NAMES = " ".join(f"{name}@{k}" for name in ("R", "P", "nDCG", "MRR") for k in CUTOFFS) + " MAP RR"
# Measures that weigh judged and unjudged passages, read from the stored hits as from a run file.
UNJUDGED_AWARE = ("Bpref", "Judged@3", "nDCG(judged_only=True)@2", "P(judged_only=True)@2", "infAP", "Rprec")
REFERENCE = {
    **{f"recall@{k}": R @ k for k in CUTOFFS},
    **{f"p@{k}": P @ k for k in CUTOFFS},
    **{f"ndcg@{k}": nDCG @ k for k in CUTOFFS},
    **{f"mrr@{k}": RR @ k for k in CUTOFFS},
    "map": AP,
    "mrr": RR,
}


def test_ir_measures_names_become_keys_in_the_existing_style():
    assert parse_metrics("R@20 nDCG@10 MRR@100 MAP P@5 N-RODCG@1") == (
        "recall@20",
        "ndcg@10",
        "mrr@100",
        "map",
        "p@5",
        "n_rodcg@1",
    )
    assert parse_metrics("recall@20,ndcg@10 mean_rank RR") == ("recall@20", "ndcg@10", "mean_rank", "mrr")
    assert parse_metrics("") == parse_metrics(None) == METRICS


@pytest.mark.parametrize("bad", ["nDCG@", "MAP(rel=x)", "R@0", "BPREF@5", "R@x", "P", "ndcg_cut", "Judged(rel=2)@5"])
def test_bad_metric_names_are_refused_naming_the_field(bad):
    with pytest.raises(InputError) as error:
        parse_metrics(bad)
    assert error.value.field == "metrics"


@pytest.fixture
def graded(db):
    """12 passages, 5 queries with graded relevance: q3 has no judgment at all, q4 only a
    non-relevant one."""
    collection = make_collection("graded")
    passages = make_text_passages(collection, [f"text {i}" for i in range(12)])
    queries = [
        make_text_query(collection, f"query {i}", f"q{i}", split=split, metadata={"subset": subset})
        for i, (split, subset) in enumerate(
            [("test", "broad"), ("test", "specific"), ("dev", "broad"), ("dev", "x"), ("dev", "none relevant")]
        )
    ]
    qrels = {
        "q0": {"d1": 2, "d4": 1, "d9": 1, "d11": 3},
        "q1": {"d0": 1},
        "q2": {"d2": 1, "d3": 2, "d7": 0},
        "q4": {"d5": 0},
    }
    by_id = {p.external_id: p for p in passages}
    for query in queries:
        add_qrels(query, {by_id[d]: r for d, r in qrels.get(query.external_id, {}).items()})
    # Distinct scores, several depths, relevant passages missed, q1 ranked nowhere near its gold.
    rankings = {
        "q0": ["d3", "d1", "d5", "d11", "d0", "d2", "d4"],
        "q1": ["d5", "d6", "d7", "d8", "d9", "d10", "d11", "d1", "d2", "d3", "d4", "d0"],
        "q2": ["d7", "d2"],
        "q3": ["d1"],
        "q4": ["d5", "d6"],
    }
    stored = {
        query: [(by_id[d], 10.0 - 0.5 * rank) for rank, d in enumerate(rankings[query.external_id])]
        for query in queries
    }
    run = save_ranked_run(collection, name="graded run", retriever="hand", rankings=stored)
    reference_qrels = [ir_measures.Qrel(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    reference_run = [
        ir_measures.ScoredDoc(q, d, 10.0 - 0.5 * rank) for q, docs in rankings.items() for rank, d in enumerate(docs)
    ]
    return run, reference_qrels, reference_run


@pytest.mark.django_db
def test_every_metric_at_every_cutoff_agrees_with_ir_measures(graded):
    run, qrels, scored = graded
    report = call_json_command("evaluate_run", run.pk, "--metrics", METRIC_NAMES, "--per-query")
    expected = ir_measures.calc_aggregate(list(REFERENCE.values()), qrels, scored)
    per_query = {
        (m.query_id, m.measure): m.value for m in ir_measures.iter_calc(list(REFERENCE.values()), qrels, scored)
    }
    assert report["queries"] == 4 and report["queries_without_relevant"] == 1
    assert report["queries_without_judgments"] == 1
    assert set(report["metrics"]) == set(REFERENCE)
    for key, measure in REFERENCE.items():
        assert report["metrics"][key] == pytest.approx(expected[measure], abs=1e-9), key
        for query in ("q0", "q1", "q2", "q4"):
            assert report["per_query"][query][key] == pytest.approx(per_query[query, measure], abs=1e-9), (query, key)


@pytest.mark.django_db
def test_measures_weighing_unjudged_passages_read_every_stored_hit_as_ir_measures_does(graded):
    """Each asked for alone, so that no other measure makes the evaluation read the whole ranking
    (judged_only@2 must rank the judged passages among all the stored hits, not the top 2)."""
    run, qrels, scored = graded
    measures = {name: ir_measures.parse_measure(name) for name in UNJUDGED_AWARE}
    per_query = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures.values(), qrels, scored)}
    for name, measure in measures.items():
        report = call_json_command("evaluate_run", run.pk, "--metrics", name, "--per-query")
        key = parse_metrics(name)[0]
        for query in ("q0", "q1", "q2", "q4"):
            assert report["per_query"][query][key] == pytest.approx(per_query[query, str(measure)], abs=1e-12), (
                query,
                name,
            )
        assert report["beyond_depth"] == []
    report = call_json_command("evaluate_run", run.pk, "--metrics", " ".join(UNJUDGED_AWARE))
    judged = {"2": "Judged@2", "3": "Judged@3", "all": "Judged"}
    expected = ir_measures.calc_aggregate([ir_measures.parse_measure(name) for name in judged.values()], qrels, scored)
    assert report["judged"] == {
        key: pytest.approx(expected[ir_measures.parse_measure(name)], abs=1e-12) for key, name in judged.items()
    }


@pytest.mark.django_db
def test_a_built_in_run_agrees_with_ir_measures_on_its_export(graded):
    _, qrels, _ = graded
    bm25 = call_json_command("retrieve", "--collection", "graded", "--retriever", "bm25", "--depth", "12")
    out = io.StringIO()
    call_command("export_run", bm25["run_id"], stdout=out)
    scored = [
        ir_measures.ScoredDoc(doc.query_id, doc.doc_id, -float(doc_rank))
        for doc_rank, doc in enumerate(ir_measures.read_trec_run(io.StringIO(out.getvalue())))
    ]  # the file's rank order, untied (BM25 ties keep candidate order in Marginalia)
    report = call_json_command("evaluate_run", bm25["run_id"], "--metrics", METRIC_NAMES)
    expected = ir_measures.calc_aggregate(list(REFERENCE.values()), qrels, scored)
    for key, measure in REFERENCE.items():
        assert report["metrics"][key] == pytest.approx(expected[measure], abs=1e-9), key


@pytest.mark.django_db
def test_defaults_are_unchanged_and_breakdowns_follow_query_fields(graded):
    run, _, _ = graded
    default = call_json_command("evaluate_run", run.pk)
    assert set(default["metrics"]) == set(METRICS) and "per_query" not in default and "by" not in default
    report = call_json_command("evaluate_run", run.pk, "--metrics", "R@5 MAP", "--by", "split", "--by", "subset")
    assert {value: block["queries"] for value, block in report["by"]["split"].items()} == {"dev": 2, "test": 2}
    assert set(report["by"]["subset"]) == {"broad", "specific", "none relevant"}
    assert report["by"]["subset"]["specific"]["metrics"]["recall@5"] == 0.0
    with pytest.raises(CommandError, match="field 'metrics': unknown metric 'BPREFS'"):
        call_json_command("evaluate_run", run.pk, "--metrics", "BPREFS")


@pytest.mark.django_db
def test_per_query_values_over_rest_are_staff_only(graded):
    run, _, _ = graded
    url = f"/api/runs/{run.pk}/per-query/?metrics=R@1%20MAP&by=split"
    response = api_client(make_user(staff=True)).get(url)
    assert response.status_code == 200
    assert set(response.json()["per_query"]) == {"q0", "q1", "q2", "q4"}
    assert set(response.json()["per_query"]["q0"]) == {"recall@1", "map"}
    assert api_client(make_user(staff=True)).get(f"/api/runs/{run.pk}/per-query/?metrics=nope").status_code == 400
    for user in (None, make_annotator(), make_user()):
        assert api_client(user).get(url).status_code in (401, 403)
