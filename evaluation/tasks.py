"""Celery tasks of evaluation: a large study's report, computed off the request (see
evaluation.reports.study_report_or_job) and cached like any report; a judge's card (which asks
the judge: on the gpu queue for a local model, "long" otherwise, see
evaluation.reports.start_judge_card); and the periodic agreement check (evaluation.alerts),
sent by Celery beat.

Every worker imports this module at start (Celery's Django fix-up imports every app's tasks), so
the modules that compute are imported inside the tasks that call them: at module level, the
reports' crowd-kit, pandas, nltk and scipy.stats and the judge card's openai cost every worker's
start about 3.5 s of CPU, whatever queue it serves (tests/jobs/test_worker_start_imports.py)."""

from celery import shared_task

from annotation.models import Study
from jobs.services import execute
from judges.models import Judge

from .alerts import due_studies


@shared_task(name="evaluation.tasks.compute_study_report")
def compute_study_report(job_id: int, study_id: int, run_ids: list[int]) -> dict:
    from .services import refresh_study_report  # scipy.stats, crowd-kit: a worker's start-up cost (docstring)

    return execute(job_id, lambda progress: refresh_study_report(study_id, run_ids, progress))


def _card(job_id: int, judge_id: int, options: dict) -> dict:
    from .judge_card import judge_card  # scipy.stats, openai: a worker's start-up cost (docstring)

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
    from .crowd_report import recheck_agreement  # crowd-kit, scipy.stats: a worker's start-up cost (docstring)

    checked = {}
    for study in Study.objects.filter(pk__in=due_studies()).order_by("pk"):
        found = recheck_agreement(study)
        if found is not None:
            checked[str(study.pk)] = found
    return {"checked": checked}
