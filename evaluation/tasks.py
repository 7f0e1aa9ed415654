"""Celery tasks of evaluation: a large study's report, computed off the request (see
evaluation.reports.study_report_or_job) and cached like any report; and the periodic agreement
check (evaluation.alerts), sent by Celery beat."""

from celery import shared_task

from annotation.models import Study
from jobs.services import execute

from .alerts import due_studies
from .crowd_report import recheck_agreement
from .services import refresh_study_report


@shared_task(name="evaluation.tasks.compute_study_report")
def compute_study_report(job_id: int, study_id: int, run_ids: list[int]) -> dict:
    return execute(job_id, lambda progress: refresh_study_report(study_id, run_ids, progress))


@shared_task(name="evaluation.tasks.watch_agreement")
def watch_agreement() -> dict:
    """Check the thresholds of every study with one whose counted judgments grew by a batch since
    its last check; returns {study id: what the check found} for those checked."""
    checked = {}
    for study in Study.objects.filter(pk__in=due_studies()).order_by("pk"):
        found = recheck_agreement(study)
        if found is not None:
            checked[str(study.pk)] = found
    return {"checked": checked}
