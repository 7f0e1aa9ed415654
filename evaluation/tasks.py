"""Celery tasks of evaluation: a large study's report, computed off the request (see
evaluation.reports.study_report_or_job) and cached like any report."""

from celery import shared_task

from jobs.services import execute

from .services import refresh_study_report


@shared_task(name="evaluation.tasks.compute_study_report")
def compute_study_report(job_id: int, study_id: int, run_ids: list[int]) -> dict:
    return execute(job_id, lambda progress: refresh_study_report(study_id, run_ids, progress))
