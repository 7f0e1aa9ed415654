"""One tie rule for every run: score descending, then passage id descending (trec_eval's), in the
stored ranks and in the exact ranks of relevant passages, so that trec_eval (pytrec_eval) on a
run's `export_run` file reproduces `evaluate_run`, and a run exported and imported again
evaluates the same."""

import io

import pytest
import pytrec_eval
from django.core.management import call_command

from retrieval.models import Hit, Run, RunQuery
from tests.factories import add_pool, add_qrels, call_json_command, make_collection, make_text_passages, make_text_query

pytestmark = pytest.mark.django_db


def exported(run_id: int) -> str:
    out = io.StringIO()
    call_command("export_run", run_id, stdout=out)
    return out.getvalue()


def trec_eval(run_text: str, qrels: dict, measures: set[str]) -> dict:
    """pytrec_eval (trec_eval itself) on the TREC lines, per query."""
    run: dict = {}
    for line in run_text.splitlines():
        qid, _, docid, _, score, _ = line.split()
        run.setdefault(qid, {})[docid] = float(score)
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)


def same_evaluation(run_id: int, other_id: int) -> bool:
    """evaluate_run's report of both runs, their ids and stored depths aside (an imported run's
    depth is what its file ranked: 2 passages where ours asked for 100)."""
    first, second = (dict(Run.objects.get(pk=pk).metrics) for pk in (run_id, other_id))
    for report in (first, second):
        report.pop("run_id"), report.pop("depth", None)
    return first == second


def test_a_tie_between_the_relevant_passage_and_another_ranks_the_larger_id_first(tmp_path):
    """The minimal case: two passages with the same text, the relevant one with the smaller id.
    Ranked by candidate order it was first (RR 1.0) while trec_eval, ir-measures and import_run
    put it second (RR 0.5); now every path says 0.5."""
    collection = make_collection("tie")
    relevant, other = make_text_passages(collection, ["the same words", "the same words"])
    query = make_text_query(collection, "same words", "q1")
    add_qrels(query, {relevant: 1})

    ours = call_json_command("retrieve", "--collection", "tie", "--retriever", "bm25")

    assert list(Hit.objects.filter(run_id=ours["run_id"]).order_by("rank").values_list("passage_id", flat=True)) == [
        other.pk,
        relevant.pk,
    ]
    assert RunQuery.objects.get(run_id=ours["run_id"]).relevant_ranks == {str(relevant.pk): 2}
    text = exported(ours["run_id"])
    assert trec_eval(text, {"q1": {relevant.external_id: 1}}, {"recip_rank"})["q1"]["recip_rank"] == 0.5
    path = tmp_path / "run.trec"
    path.write_text(text)
    imported = call_json_command("import_run", "tie", path, "--name", "again")
    assert same_evaluation(imported["run_id"], ours["run_id"])


def test_trec_eval_on_the_export_of_a_run_full_of_ties_reproduces_its_exact_ranks_and_metrics(tmp_path):
    """Repeated texts give many equal scores, in a collection-wide set and in pools listed in an
    order that is not the ids' order. Every relevant passage's stored exact rank is where
    trec_eval puts it, and importing the export changes no metric."""
    collection = make_collection("ties")
    texts = ["salt marsh", "tide", "salt marsh", "bells under the sea", "tide", "salt marsh", "sea", "tide"] * 2
    passages = make_text_passages(collection, texts)
    queries = [make_text_query(collection, text, f"q{n}") for n, text in enumerate(["salt marsh tide", "sea", "tide"])]
    pooled = make_text_query(collection, "marsh tide sea", "pooled")
    add_pool(pooled, [passages[index] for index in (7, 0, 2, 15, 4, 9, 6)])
    qrels = {}
    for query, chosen in zip([*queries, pooled], [(0, 10, 4), (6, 3), (1, 12), (2, 15, 6)]):
        add_qrels(query, {passages[index]: 1 + index % 2 for index in chosen})
        qrels[query.external_id] = {passages[index].external_id: 1 + index % 2 for index in chosen}

    ours = call_json_command("retrieve", "--collection", "ties", "--retriever", "bm25", "--depth", len(texts))

    text = exported(ours["run_id"])
    per_query = trec_eval(text, qrels, {"recip_rank", "ndcg_cut_10", "P_5", "map"})
    by_id = {passage.pk: passage.external_id for passage in passages}
    for result in RunQuery.objects.filter(run_id=ours["run_id"]).select_related("query"):
        lines = [line.split() for line in text.splitlines() if line.split()[0] == result.query.external_id]
        trec_order = sorted(lines, key=lambda line: (float(line[4]), line[2]), reverse=True)
        trec_ranks = {line[2]: rank for rank, line in enumerate(trec_order, start=1)}
        assert {by_id[int(pk)]: rank for pk, rank in result.relevant_ranks.items()} == {
            docid: trec_ranks[docid] for docid in qrels[result.query.external_id]
        }
        assert [line[3] for line in lines] == [str(rank) for rank in range(1, len(lines) + 1)]
        assert lines == trec_order  # stored ranks are trec_eval's order
        assert 1 / result.gold_rank == per_query[result.query.external_id]["recip_rank"]
    path = tmp_path / "run.trec"
    path.write_text(text)
    imported = call_json_command("import_run", "ties", path, "--name", "again")
    assert same_evaluation(imported["run_id"], ours["run_id"])
