"""Asking a judge: its backend (a local model, or an OpenAI-compatible endpoint through the
openai client) answers a study's items or a rerank's pairs. Apart from judges.services, which
registers judges and queues their work, because the backends load the openai client (most of a
second): the Celery tasks, judge_study and the reranker import this module, pages and the API
do not.

Asking is resumable by construction: every answer is stored as soon as its batch returns (or
stops: a cancellation or a failed request keeps the answers that arrived), keyed by (judge
version, prompt hash, item, sample), and a run only asks what is not stored yet. A killed
worker, a cancelled job or a second run therefore never asks a stored prompt again. Progress
moves answer by answer, as each arrives, not batch by batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field

from annotation.models import Item, Study
from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.models import Run

from .backends import PROMPT_BACKENDS
from .ensemble import EnsembleBackend
from .models import Judge, JudgeAnswer
from .prompts import Prompt
from .services import (
    MAX_SAMPLES,
    answer_from,
    judge_prompt,
    judge_tally,
    judged_items,
    run_answers,
    store_answers,
)


def backend_for(judge: Judge):
    if judge.backend in PROMPT_BACKENDS:
        return PROMPT_BACKENDS[judge.backend](judge.settings)
    if judge.backend == Judge.Backend.ENSEMBLE:
        return EnsembleBackend(judge.settings)
    source = "a run" if judge.backend == Judge.Backend.RUN else "labels imported from a file"
    raise InputError(f"judge {judge} answers from {source}, not from prompts", field="judge")


@dataclass(frozen=True)
class Question:
    """One prompt to ask (sample `sample`), and what its answer is stored under: an item, or a
    (query, passage) pair."""

    prompt: Prompt
    sample: int
    keys: dict = field(default_factory=dict)


def ask(judge: Judge, questions: Sequence[Question], progress: Progress = no_progress) -> list[JudgeAnswer]:
    """Ask the judge's backend `questions`, `batch_size` at a time, progress moving answer by
    answer; each batch's answers are stored when it ends or stops (a cancellation or a failed
    request keeps those that arrived), so a killed worker resumes where it stopped. The stored
    answers, in the questions' order."""
    answers: list[JudgeAnswer] = []
    if not questions:
        return answers
    backend = backend_for(judge)
    size = judge.settings.get("batch_size", 8)
    for start in range(0, len(questions), size):
        batch = questions[start : start + size]
        arrived = []
        try:
            with closing(backend.answer_each([(question.prompt, question.sample) for question in batch])) as each:
                for index, completion in each:
                    arrived.append((index, completion))
                    done = len(answers) + len(arrived)
                    progress(done / len(questions), f"{done}/{len(questions)} answers from {judge}")
        finally:
            fresh = [
                answer_from(batch[index].prompt, completion, sample=batch[index].sample, **batch[index].keys)
                for index, completion in sorted(arrived, key=lambda pair: pair[0])
            ]
            store_answers(judge, fresh)
            answers += fresh
    return answers


def ask_items(judge: Judge, items: Sequence[Item], samples: int, progress: Progress = no_progress) -> int:
    """Ask the judge `items` `samples` times each (sample i with seed + i), skipping every
    (item, prompt, sample) already stored; how many were asked."""
    prompts = {item.pk: judge_prompt(item, judge) for item in items}
    stored = set(
        JudgeAnswer.objects.filter(judge=judge, item__in=items, sample__lt=samples).values_list(
            "item_id", "prompt_hash", "sample"
        )
    )
    pending = [
        Question(prompts[item.pk], sample, {"item": item})
        for sample in range(samples)
        for item in items
        if (item.pk, prompts[item.pk].hash, sample) not in stored
    ]
    loading = " (loading the model first)" if judge.backend == Judge.Backend.LOCAL and pending else ""
    progress(
        0.0, f"0/{len(pending)} answers from {judge}{loading}; {len(items) * samples - len(pending)} stored before"
    )
    return len(ask(judge, pending, progress))


def judge_study(study: Study, judge: Judge, samples: int = 1, progress: Progress = no_progress) -> dict:
    """Ask the judge every work item `samples` times (sample i with seed + i); answers already
    stored for the same prompt are not asked again. Returns the judge's tally on the study."""
    if not 1 <= samples <= MAX_SAMPLES:
        raise InputError(f"must be 1 to {MAX_SAMPLES}, got {samples}", field="samples")
    items = judged_items(study)
    if judge.backend == Judge.Backend.RUN:
        run = Run.objects.get(pk=judge.settings["run"])
        if run.collection_id != study.collection_id:
            raise InputError(f"run {run.pk} ranks another collection than study {study.pk}", field="judge")
        stored = set(JudgeAnswer.objects.filter(judge=judge, item__in=items).values_list("item_id", flat=True))
        fresh = run_answers(run, [i for i in items if i.pk not in stored])
        store_answers(judge, fresh)
        progress(1.0, f"{len(fresh)} items scored from run {run.pk}")
        return judge_tally(study, judge, samples=1, asked=len(fresh))
    asked = ask_items(judge, items, samples, progress)
    return judge_tally(study, judge, samples=samples, asked=asked)
