"""Celery tasks: judging a study through `jobs.services.execute` (progress, cancellation, the
Job's verdict). Local models go to the "gpu" queue, endpoints and runs to "long" (the job's
queue; `judge_study_on_cpu` keeps the name it had before the "long" queue, so stored jobs retry).

Every worker imports this module at start, so what judges is imported inside the tasks: the
backends import the openai client (about 0.8 s of CPU), which at module level every worker's
start paid, judging or not (tests/jobs/test_worker_start_imports.py)."""

from celery import shared_task

from annotation.models import Study
from jobs.services import execute

from .models import Judge


def _judge(job_id: int, study_id: int, judge_id: int, samples: int) -> dict:
    from .asking import judge_study  # openai: a worker's start-up cost (docstring)

    return execute(
        job_id,
        lambda progress: judge_study(Study.objects.get(pk=study_id), Judge.objects.get(pk=judge_id), samples, progress),
    )


@shared_task(name="judges.tasks.judge_study_on_gpu")
def judge_study_on_gpu(job_id: int, study_id: int, judge_id: int, samples: int = 1) -> dict:
    return _judge(job_id, study_id, judge_id, samples)


@shared_task(name="judges.tasks.judge_study_on_cpu")
def judge_study_on_cpu(job_id: int, study_id: int, judge_id: int, samples: int = 1) -> dict:
    return _judge(job_id, study_id, judge_id, samples)


def _label_pool(job_id: int, judge_id: int, spec: dict, samples: int) -> dict:
    from .pools import label_pool, pool_pairs  # openai: a worker's start-up cost (docstring)

    def work(progress):
        judge = Judge.objects.get(pk=judge_id)
        return label_pool(judge, pool_pairs(judge, spec), samples, progress)

    return execute(job_id, work)


@shared_task(name="judges.tasks.label_pool_on_gpu")
def label_pool_on_gpu(job_id: int, judge_id: int, spec: dict, samples: int = 1) -> dict:
    return _label_pool(job_id, judge_id, spec, samples)


@shared_task(name="judges.tasks.label_pool_on_long")
def label_pool_on_long(job_id: int, judge_id: int, spec: dict, samples: int = 1) -> dict:
    return _label_pool(job_id, judge_id, spec, samples)


def _post_edit(job_id: int, study_id: int, judge_id: int, share: float, seed: int) -> dict:
    from .post_editing import enable_post_editing  # openai: a worker's start-up cost (docstring)

    return execute(
        job_id,
        lambda progress: enable_post_editing(
            Study.objects.get(pk=study_id), Judge.objects.get(pk=judge_id), share, seed, progress
        ),
    )


@shared_task(name="judges.tasks.post_edit_on_gpu")
def post_edit_on_gpu(job_id: int, study_id: int, judge_id: int, share: float = 1.0, seed: int = 0) -> dict:
    return _post_edit(job_id, study_id, judge_id, share, seed)


@shared_task(name="judges.tasks.post_edit_on_long")
def post_edit_on_long(job_id: int, study_id: int, judge_id: int, share: float = 1.0, seed: int = 0) -> dict:
    return _post_edit(job_id, study_id, judge_id, share, seed)
