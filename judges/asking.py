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

from contextlib import closing

from annotation.models import Study
from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.models import Run

from .backends import LocalBackend, OpenAIBackend
from .models import Judge, JudgeAnswer
from .prompts import item_prompt
from .services import MAX_SAMPLES, answer_from, judge_tally, judged_items, run_answers, store_answers


def backend_for(judge: Judge):
    if judge.backend == Judge.Backend.LOCAL:
        return LocalBackend(judge.settings)
    if judge.backend == Judge.Backend.OPENAI:
        return OpenAIBackend(judge.settings)
    raise InputError(f"judge {judge} answers from a run, not from prompts", field="judge")


def judge_study(study: Study, judge: Judge, samples: int = 1, progress: Progress = no_progress) -> dict:
    """Ask the judge every work item `samples` times (sample i with seed + i); answers already
    stored for the same prompt are not asked again. Returns the judge's tally on the study."""
    if not 1 <= samples <= MAX_SAMPLES:
        raise InputError(f"must be 1 to {MAX_SAMPLES}, got {samples}", field="samples")
    items = judged_items(study)
    asked = 0
    if judge.backend == Judge.Backend.RUN:
        run = Run.objects.get(pk=judge.settings["run"])
        if run.collection_id != study.collection_id:
            raise InputError(f"run {run.pk} ranks another collection than study {study.pk}", field="judge")
        stored = set(JudgeAnswer.objects.filter(judge=judge, item__in=items).values_list("item_id", flat=True))
        fresh = run_answers(run, [i for i in items if i.pk not in stored])
        store_answers(judge, fresh)
        asked = len(fresh)
        progress(1.0, f"{len(fresh)} items scored from run {run.pk}")
        return judge_tally(study, judge, samples=1, asked=asked)
    prompts = {item.pk: item_prompt(item) for item in items}
    stored = set(
        JudgeAnswer.objects.filter(judge=judge, item__in=items, sample__lt=samples).values_list(
            "item_id", "prompt_hash", "sample"
        )
    )
    pending = [
        (item, sample)
        for sample in range(samples)
        for item in items
        if (item.pk, prompts[item.pk].hash, sample) not in stored
    ]
    total = len(pending)
    loading = " (loading the model first)" if judge.backend == Judge.Backend.LOCAL and pending else ""
    progress(0.0, f"0/{total} answers from {judge}{loading}; {len(items) * samples - total} stored before")
    if pending:
        backend = backend_for(judge)
        size = judge.settings.get("batch_size", 8)
        for start in range(0, total, size):
            batch = pending[start : start + size]
            arrived = []
            try:
                with closing(backend.answer_each([(prompts[item.pk], sample) for item, sample in batch])) as answers:
                    for index, completion in answers:
                        arrived.append((batch[index], completion))
                        asked += 1
                        progress(asked / total, f"{asked}/{total} answers from {judge}")
            finally:
                # Stored together, even when a cancellation or a failed request stops the batch.
                store_answers(
                    judge,
                    [
                        answer_from(prompts[item.pk], completion, item=item, sample=sample)
                        for (item, sample), completion in arrived
                    ],
                )
    return judge_tally(study, judge, samples=samples, asked=asked)
