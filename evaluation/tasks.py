"""Celery tasks of evaluation: a large study's report, computed off the request (see
evaluation.reports.study_report_or_job) and cached like any report; a judge's card (which asks
the judge: on the gpu queue for a local model, "long" otherwise, see
evaluation.reports.start_judge_card); and the periodic agreement check (evaluation.alerts),
sent by Celery beat."""

from celery import shared_task

from annotation.models import Study
from jobs.services import execute
from judges.models import Judge

from .alerts import due_studies
from .crowd_report import recheck_agreement
from .judge_card import judge_card
from .services import refresh_study_report


@shared_task(name="evaluation.tasks.compute_study_report")
def compute_study_report(job_id: int, study_id: int, run_ids: list[int]) -> dict:
    return execute(job_id, lambda progress: refresh_study_report(study_id, run_ids, progress))


def _card(job_id: int, judge_id: int, options: dict) -> dict:
    def work(progress):
        card = judge_card(Judge.objects.get(pk=judge_id), options, progress=progress)
        return {"card": card.pk, "judge": card.judge.name, "version": card.judge.version}

    return execute(job_id, work)


@shared_task(name="evaluation.tasks.judge_card_on_gpu")
def judge_card_on_gpu(job_id: int, judge_id: int, options: dict) -> dict:
    return _card(job_id, judge_id, options)


@shared_task(name="evaluation.tasks.judge_card_on_long")
def judge_card_on_long(job_id: int, judge_id: int, options: dict) -> dict:
    return _card(job_id, judge_id, options)


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
