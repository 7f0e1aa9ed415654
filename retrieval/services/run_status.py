"""How a run that stopped ends: a run whose job failed or was cancelled keeps no hits, and a run
whose job staff retried is pending again. The receivers live here, apart from
retrieval.services.runs (numpy, the scorers), because the app connects them at start-up in every
process (retrieval.apps), and a command that ranks nothing should not load what ranking needs.
"""

from __future__ import annotations

from django.db import transaction
from django.dispatch import receiver

from jobs.models import Job
from jobs.signals import job_ended, job_requeued
from retrieval.chunks import chunks
from retrieval.models import Hit, Run, RunQuery


def delete_results(run: Run, query_ids: list[int] | None = None) -> None:
    """Remove a run's hits and gold ranks (of `query_ids` only, for one shard)."""
    if query_ids is None:
        Hit.objects.filter(run=run).delete()
        RunQuery.objects.filter(run=run).delete()
        return
    for chunk in chunks(query_ids):
        Hit.objects.filter(run=run, query_id__in=chunk).delete()
        RunQuery.objects.filter(run=run, query_id__in=chunk).delete()


def has_results(run: Run, query_ids: list[int]) -> bool:
    """Whether the run stored anything for these queries (reads only: a shard's first attempt
    need not take the database's write lock to delete nothing)."""
    return any(
        Hit.objects.filter(run=run, query_id__in=chunk).exists()
        or RunQuery.objects.filter(run=run, query_id__in=chunk).exists()
        for chunk in chunks(query_ids)
    )


def settle_run(run: Run, status: str) -> None:
    """A run that stopped before the end keeps no hits: mark it failed or cancelled and remove
    what was written."""
    with transaction.atomic():
        Run.objects.filter(pk=run.pk, status__in=[Run.Status.PENDING, Run.Status.RUNNING]).update(status=status)
        delete_results(run)
    run.status = status


@receiver(job_ended)
def settle_runs_of_ended_job(sender, job_id: int, status: str, **kwargs) -> None:
    """A run's job failed or was cancelled (its worker lost, the stale sweep, staff, the broker):
    the run follows and keeps no partial hits."""
    run_status = Run.Status.CANCELLED if status == Job.Status.CANCELLED else Run.Status.FAILED
    for run in Run.objects.filter(job_id=job_id, status__in=[Run.Status.PENDING, Run.Status.RUNNING]):
        settle_run(run, run_status)


@receiver(job_requeued)
def reset_runs_of_requeued_job(sender, job_id: int, **kwargs) -> None:
    """Staff retried a run's job: the run (which kept no hits) is pending again."""
    Run.objects.filter(job_id=job_id, status__in=[Run.Status.FAILED, Run.Status.CANCELLED]).update(
        status=Run.Status.PENDING, seconds=None, metrics=None
    )
