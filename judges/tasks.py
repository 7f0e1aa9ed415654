"""Celery tasks: judging a study through `jobs.services.execute` (progress, cancellation, the
Job's verdict). Local models go to the "gpu" queue, endpoints and runs to "long" (the job's
queue; `judge_study_on_cpu` keeps the name it had before the "long" queue, so stored jobs retry)."""

from celery import shared_task

from annotation.models import Study
from jobs.services import execute

from .asking import judge_study
from .models import Judge


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
