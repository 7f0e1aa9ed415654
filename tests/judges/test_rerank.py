"""`retrieve --retriever judge --judge NAME --run RUN_ID [--depth k]`: a run's top k reordered by
a judge's 0-10 scores (ties in the run's order), saved as a run that evaluate_run scores like
any other; pairs already scored are not asked again."""

import pytest
from django.core.management.base import CommandError

from judges.models import JudgeAnswer
from judges.services import register_judge
from retrieval.models import Hit, Run
from tests.factories import (
    add_qrels,
    call_json_command,
    make_collection,
    make_scored_run,
    make_text_passages,
    make_text_query,
)

pytestmark = pytest.mark.django_db


def ranked(run_id: int) -> list[str]:
    return list(Hit.objects.filter(run_id=run_id).order_by("rank").values_list("passage__external_id", flat=True))


def test_a_judge_reranks_a_runs_top_k_ties_keep_the_runs_order_and_scored_pairs_are_cached(chat_server):
    server = chat_server("--answer", "SCORE: 2", "--keyword", "MAGICWORD", "--keyword-answer", "SCORE: 9")
    collection = make_collection()
    passages = make_text_passages(
        collection, ["The first passage.", "The second passage.", "The MAGICWORD passage.", "The last passage."]
    )
    query = make_text_query(collection, "Which passage?", external_id="q0")
    add_qrels(query, {passages[2]: 1})
    run = make_scored_run(collection, {query: {p: -i for i, p in enumerate(passages)}})
    run.name = "bm25"
    run.save(update_fields=["name"])
    register_judge("served", "openai", {"base_url": server.base_url, "model": "m", "batch_size": 2})
    before = [p.external_id for p in passages]
    assert ranked(run.pk) == before

    summary = call_json_command(
        "retrieve", "--retriever", "judge", "--judge", "served", "--run", str(run.pk), "--depth", "3"
    )

    reranked = Run.objects.get(pk=summary["run_id"])
    assert ranked(reranked.pk) == [before[2], before[0], before[1], before[3]]
    assert reranked.parameters["reranked_run"] == run.pk and reranked.parameters["rerank_depth"] == 3
    assert len(server.requests()) == 3 and JudgeAnswer.objects.filter(item__isnull=True).count() == 3
    metrics = call_json_command("evaluate_run", str(reranked.pk))["metrics"]
    assert metrics["recall@1"] == 1.0

    again = call_json_command(
        "retrieve", "--retriever", "judge", "--judge", "served", "--run", str(run.pk), "--depth", "2"
    )
    assert ranked(again["run_id"]) == [before[0], before[1], before[2], before[3]]
    assert len(server.requests()) == 3  # both pairs were scored by the first rerank


def test_a_rerank_needs_a_run(chat_server):
    with pytest.raises(CommandError, match="--run RUN_ID"):
        call_json_command("retrieve", "--retriever", "judge")
