"""A judge as a reranker (BIRCO's direct scoring): each of a run's top k passages per query is
scored 0-10 by the judge given the task objective, and the top k is reordered by that score,
ties kept in the run's order. The result is an ordinary `Run` (save_ranked_run), so evaluate_run,
export_run and compare_runs treat it like any other.

Stored scores encode the order exactly, because save_ranked_run breaks equal scores by passage
id (trec_eval's rule), not by the run's order: a judged passage scores its 0-10 answer plus a
tie-break below 0.01 that falls with its rank in the run; an unreadable answer scores -1 plus the
same tie-break (below every readable one); passages beyond the top k keep the run's order below
them (score -(k + rank)). Answers are cached per (judge version, prompt, query, passage).
"""

from __future__ import annotations

from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.models import Hit, Run
from retrieval.scoring import query_text
from retrieval.services.external_runs import save_ranked_run

from .asking import Question, ask
from .models import Judge, JudgeAnswer
from .prompts import MASK, pair_prompt, read_objective
from .services import get_judge

DEFAULT_RERANK_DEPTH = 10
UNREADABLE_SCORE = -1.0
TIE_BREAK_SPAN = 0.01


def judge_scores(
    judge: Judge, pairs: list[tuple], objective: str, progress: Progress = no_progress
) -> dict[tuple[int, int], float | None]:
    """(query id, passage id) -> the judge's 0-10 score (None when unreadable) for each
    (query, query text, passage) in `pairs`, asking only what is not stored yet."""
    prompt_name = judge.settings.get("prompt", "")
    prompts = {
        (query.pk, passage.pk): pair_prompt(text, passage.text, objective, prompt_name)
        for query, text, passage in pairs
    }
    stored = {
        (query_id, passage_id): parsed
        for query_id, passage_id, prompt_hash, parsed in JudgeAnswer.objects.filter(
            judge=judge, item__isnull=True, sample=0, prompt_hash__in=[p.hash for p in prompts.values()]
        ).values_list("query_id", "passage_id", "prompt_hash", "parsed")
        if (query_id, passage_id) in prompts and prompts[(query_id, passage_id)].hash == prompt_hash
    }
    pending = [
        Question(prompts[(query.pk, passage.pk)], 0, {"query": query, "passage": passage})
        for query, _, passage in pairs
        if (query.pk, passage.pk) not in stored
    ]
    for answer in ask(judge, pending, progress):
        stored[(answer.query_id, answer.passage_id)] = answer.parsed
    return {key: (parsed or {}).get("score") for key, parsed in stored.items()}


def rerank_run(
    run: Run, judge: Judge, depth: int = DEFAULT_RERANK_DEPTH, objective: str = "", progress: Progress = no_progress
) -> Run:
    """The run's top `depth` per query reordered by the judge's scores, saved as a new run."""
    if depth < 1:
        raise InputError(f"must be at least 1, got {depth}", field="depth")
    if judge.backend == Judge.Backend.RUN:
        raise InputError("a run judge has no prompts to score passages with", field="judge")
    context = (run.parameters.get("context_left", 4), run.parameters.get("context_right", 4))
    hits: dict = {}
    for hit in Hit.objects.filter(run=run).select_related("query", "passage").order_by("query_id", "rank"):
        hits.setdefault(hit.query, []).append(hit)
    pairs = [
        (query, query_text(query, *context, MASK), hit.passage)
        for query, ranked in hits.items()
        for hit in ranked[:depth]
    ]
    scores = judge_scores(judge, pairs, objective, lambda f, m: progress(0.95 * f, m))
    rankings = {}
    for query, ranked in hits.items():
        rankings[query] = []
        for position, hit in enumerate(ranked):
            if position < depth:
                score = scores.get((query.pk, hit.passage_id))
                tie_break = TIE_BREAK_SPAN * (1 - (position + 1) / (depth + 1))
                value = (UNREADABLE_SCORE if score is None else float(score)) + tie_break
            else:
                value = -float(depth + position + 1)
            rankings[query].append((hit.passage_id, value))
    name = f"{run.name or f'run {run.pk}'} reranked by {judge} top {depth}"
    return save_ranked_run(
        run.collection,
        name=name[:200],
        retriever=f"judge {judge.name} v{judge.version}",
        rankings=rankings,
        parameters={
            "reranked_run": run.pk,
            "judge": judge.name,
            "judge_version": judge.version,
            "rerank_depth": depth,
            "context_left": context[0],
            "context_right": context[1],
        },
        queries=list(run.query_results.values_list("query_id", flat=True)) or None,
        progress=lambda f, m: progress(0.95 + 0.05 * f, m),
    )


def rerank_from_options(run: Run, depth: int | None, options: dict, progress: Progress) -> dict:
    """`retrieve --retriever judge --run RUN_ID [--depth k] [--judge NAME] [--objective-file F]`."""
    reranked = rerank_run(
        run,
        get_judge(options.get("judge")),
        depth or DEFAULT_RERANK_DEPTH,
        read_objective(options.get("objective_file")),
        progress,
    )
    return {
        "run_id": reranked.pk,
        "name": reranked.name,
        "reranked_run": run.pk,
        "queries": reranked.query_results.count(),
        "seconds": reranked.seconds,
    }
