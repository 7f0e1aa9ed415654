"""Celery tasks of annotation: training a dense retriever on a study's judgments (the pairs are
built here, on the gpu queue's worker, not in the request that queued it)."""

from celery import shared_task

from .services.study_training import run_study_training


@shared_task(name="annotation.tasks.train_on_study", ignore_result=True)
def train_on_study(job_id: int, study_id: int, params: dict, validation_share: float) -> dict:
    return run_study_training(job_id, study_id, params, validation_share)
