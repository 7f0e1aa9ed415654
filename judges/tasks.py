"""Celery tasks: judging a study through `jobs.services.execute` (progress, cancellation, the
Job's verdict). Local models go to the "gpu" queue, endpoints and runs to "long" (the job's
queue; `judge_study_on_cpu` keeps the name it had before the "long" queue, so stored jobs retry)."""

from celery import shared_task

from annotation.models import Study
from jobs.services import execute

from .asking import judge_study
from .models import Judge
from .pools import label_pool, pool_pairs
from .post_editing import enable_post_editing


def _judge(job_id: int, study_id: int, judge_id: int, samples: int) -> dict:
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
