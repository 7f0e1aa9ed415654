"""Celery tasks: judging a study through `jobs.services.execute` (progress, cancellation, the
Job's verdict). Local models go to the "gpu" queue, endpoints and runs to "cpu"
(marginalia/celery.py routes by name)."""

from celery import shared_task

from annotation.models import Study
from jobs.services import execute

from .asking import judge_study
from .models import Judge
from .pools import label_pool, pool_pairs


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


@shared_task(name="judges.tasks.label_pool_on_cpu")
def label_pool_on_cpu(job_id: int, judge_id: int, spec: dict, samples: int = 1) -> dict:
    return _label_pool(job_id, judge_id, spec, samples)
