"""A TREC run written by hand (not by Marginalia: ties, a query left out) is a first-class run:
evaluated as ir-measures evaluates it, the source of a proxy study's negatives, a relevance
study's pool, and a "model" in the study report whose partial coverage is reported."""

import ir_measures
import pytest
from ir_measures import RR, R, nDCG

from annotation.models import Item
from annotation.services import create_proxy_study, create_relevance_study
from retrieval.models import Qrel, Run
from tests.factories import add_judgment, call_json_command, gold_position, make_annotator, make_relic_collection

pytestmark = pytest.mark.django_db


def negatives_file(tmp_path):
    """Per quote i (quote5 left out): the gold tied at 2.0 with two far windows, two below."""
    lines = []
    for number in range(5):
        start = 10 + 10 * number
        ranked = [(start, 2.0), (start + 5, 2.0), (start + 3, 2.0), (start - 4, 1.0), (start + 7, 0.5)]
        lines += [
            f"quote{number} Q0 book:{s}:1 {rank} {score} bm25-pyserini" for rank, (s, score) in enumerate(ranked, 1)
        ]
    path = tmp_path / "negatives.trec"
    path.write_text("\n".join(lines) + "\n")
    return path


def model_file(tmp_path, study):
    """A system that prefers the gold on items 0-2, a negative on item 3, and scores only one
    (non-gold) candidate of item 4."""
    lines = []
    for number, item in enumerate(Item.objects.filter(study=study).order_by("position").select_related("query")):
        candidates = list(item.candidates.order_by("position").select_related("passage"))
        if number == 4:
            candidates = [c for c in candidates if not c.is_gold][:1]
        for candidate in candidates:
            best = candidate.is_gold if number < 3 else not candidate.is_gold
            score = 0.9 if best else 0.1 * candidate.position
            lines.append(f"{item.query.external_id} Q0 {candidate.passage.external_id} 0 {score} cross-encoder")
    ranked = []
    for query in dict.fromkeys(line.split()[0] for line in lines):
        rows = sorted((line for line in lines if line.split()[0] == query), key=lambda line: -float(line.split()[4]))
        ranked += [" ".join([*row.split()[:3], str(rank), *row.split()[4:]]) for rank, row in enumerate(rows, 1)]
    path = tmp_path / "model.trec"
    path.write_text("\n".join(ranked) + "\n")
    return path


def test_a_hand_written_run_end_to_end(tmp_path):
    collection = make_relic_collection(6, name="novel")
    imported = call_json_command("import_run", "novel", negatives_file(tmp_path), "--name", "pyserini")
    assert (imported["queries"], imported["hits"], imported["queries_without_ranking"]) == (5, 25, 1)
    negatives = Run.objects.get(pk=imported["run_id"])

    # Metrics as ir-measures computes them on the same file (ties already in trec_eval's order).
    qrels = [
        ir_measures.Qrel(q, p, r)
        for q, p, r in Qrel.objects.filter(query__collection=collection).values_list(
            "query__external_id", "passage__external_id", "relevance"
        )
    ]
    scored = list(ir_measures.read_trec_run(str(negatives_file(tmp_path))))
    expected = ir_measures.calc_aggregate([R @ 1, R @ 3, nDCG @ 10, RR], qrels, scored)
    report = call_json_command("evaluate_run", negatives.pk, "--metrics", "R@1 R@3 nDCG@10 RR")
    assert report["metrics"]["recall@1"] == pytest.approx(expected[R @ 1], abs=1e-9) == 0
    assert report["metrics"]["recall@3"] == pytest.approx(expected[R @ 3], abs=1e-9)
    assert report["metrics"]["ndcg@10"] == pytest.approx(expected[nDCG @ 10], abs=1e-9)
    assert report["metrics"]["mrr"] == pytest.approx(expected[RR], abs=1e-9)

    # Negatives for a proxy study: the quote the run left out cannot give an item.
    creation = create_proxy_study(name="from pyserini", collection=collection, negatives_run=negatives, items=6, seed=3)
    study = creation.study
    assert study.items.count() == 5 and [skipped.query for skipped in creation.skipped] == ["quote5"]
    for item in study.items.all():
        shown = {c.passage.external_id for c in item.candidates.select_related("passage") if not c.is_gold}
        start = 10 + 10 * int(item.query.external_id.removeprefix("quote"))
        assert shown == {f"book:{start + 5}:1", f"book:{start + 3}:1"}  # its two best non-gold, ties by docid

    # Humans all pick the gold; the model is imported from another hand-written file.
    annotators = [make_annotator() for _ in range(3)]
    for item in study.items.all():
        for annotator in annotators:
            add_judgment(item, annotator, gold_position(item.pk))
    model = call_json_command("import_run", "novel", model_file(tmp_path, study), "--name", "cross-encoder")
    report = call_json_command("study_report", study.pk, "--model-run", model["run_id"], "--model-run", negatives.pk)
    assert report["majority_accuracy"] == 1.0
    assert report["model_accuracy"][str(model["run_id"])] == pytest.approx(3 / 5)
    section = report["models"][str(model["run_id"])]
    assert (section["shown_candidates"], section["scored_candidates"], section["fully_scored_items"]) == (15, 13, 4)
    assert section["candidate_coverage"] == pytest.approx(13 / 15)
    assert report["models"][str(negatives.pk)]["comparable"] is False


def test_an_imported_run_is_a_pool_source_for_a_relevance_study(tmp_path):
    collection = make_relic_collection(6, name="novel")
    imported = call_json_command("import_run", "novel", negatives_file(tmp_path), "--name", "pyserini")
    run = Run.objects.get(pk=imported["run_id"])
    creation = create_relevance_study(name="pooled", collection=collection, runs=[run], depth=2, seed=1)
    pairs = {
        (item.query.external_id, candidate.passage.external_id)
        for item in creation.study.items.select_related("query")
        for candidate in item.candidates.select_related("passage")
    }
    expected = {(f"quote{n}", f"book:{10 + 10 * n + offset}:1") for n in range(5) for offset in (5, 3)}
    assert pairs == expected
