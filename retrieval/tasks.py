"""Celery tasks. Each runs a service function through `jobs.services.execute`, so the Job row
records status, progress, result and error whatever the task does. Queues are chosen by task
name in marginalia/celery.py: BM25 on "cpu", dense on "gpu". A run task is one shard of a run
(retrieval.services.runs.plan_shards); the run's own job is the shards' parent."""

from pathlib import Path

from celery import shared_task

from jobs.models import Job
from jobs.services import execute

from .models import Collection, Run
from .services import import_jobs
from .services.external_runs import imported_run_summary
from .services.import_status import IMPORT_PART_TASK
from .services.runs import complete_sharded_run, execute_shard
from .services.trec_files import IMPORT_RUN_TASK, import_trec_run


def _execute_shard_job(job_id: int, run_id: int, query_ids: list[int]) -> dict:
    """One shard of a run as job `job_id`; the shard that completes the run also finishes it."""
    result = execute(job_id, lambda progress: execute_shard(Run.objects.get(pk=run_id), query_ids, progress))
    complete_sharded_run(run_id)
    return result


@shared_task(name="retrieval.tasks.run_bm25", ignore_result=True)
def run_bm25(job_id: int, run_id: int, query_ids: list[int]) -> dict:
    return _execute_shard_job(job_id, run_id, query_ids)


@shared_task(name="retrieval.tasks.run_dense", ignore_result=True)
def run_dense(job_id: int, run_id: int, query_ids: list[int]) -> dict:
    return _execute_shard_job(job_id, run_id, query_ids)


@shared_task(name=IMPORT_PART_TASK, ignore_result=True)
def import_part(job_id: int, number: int) -> dict:
    """One part (a book, or a chunk of a long book) of an import spread over workers; the part
    that finishes last completes the import."""
    result = execute(job_id, lambda progress: import_jobs.import_part(job_id, number, progress))
    import_jobs.complete_import(Job.objects.get(pk=job_id).parent_id)
    return result


@shared_task(name="retrieval.tasks.train_retriever", ignore_result=True)
def train_retriever(
    job_id: int, collection_id: int, params: dict, pairs: list | None = None, validation_pairs: list | None = None
) -> dict:
    from .training import run_training_job  # torch loads only where training runs

    return run_training_job(job_id, collection_id, params, pairs, validation_pairs)


@shared_task(name=IMPORT_RUN_TASK)
def import_run(job_id: int, collection_id: int, path: str, name: str, filename: str) -> dict:
    """Import an uploaded TREC run file (checked when it was uploaded); the upload is removed
    whatever happens."""

    def work(progress) -> dict:
        try:
            run = import_trec_run(
                Collection.objects.get(pk=collection_id), path, name=name, progress=progress, label=filename
            )
        finally:
            Path(path).unlink(missing_ok=True)
        Run.objects.filter(pk=run.pk).update(job_id=job_id)
        return imported_run_summary(run)

    return execute(job_id, work)
