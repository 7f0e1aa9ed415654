"""Celery tasks of evaluation: a large study's report, computed off the request (see
evaluation.reports.study_report_or_job) and cached like any report; a judge's card (which asks
the judge: on the gpu queue for a local model, see evaluation.reports.start_judge_card)."""

from celery import shared_task

from jobs.services import execute
from judges.models import Judge

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


@shared_task(name="evaluation.tasks.judge_card_on_cpu")
def judge_card_on_cpu(job_id: int, judge_id: int, options: dict) -> dict:
    return _card(job_id, judge_id, options)
