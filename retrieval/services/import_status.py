"""How an import spread over the workers (retrieval.services.import_jobs) ends when it stops: a
collection whose import job failed or was cancelled keeps no books (its row stays, named and
visible, so that `retry_job` can import into it again), and a collection whose import has not
succeeded is not ranked. The receivers live here, apart from the importers (spaCy, numpy),
because the app connects them at start-up in every process."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.dispatch import receiver

from jobs.models import Job
from jobs.signals import job_ended
from retrieval.models import Collection, Document, Passage, Query

IMPORT_KIND = "import"
# The task that imports one part (retrieval/tasks.py), named so that this module need not load it.
IMPORT_PART_TASK = "retrieval.tasks.import_part"


def work_folder(job_id: int) -> Path:
    """Where an import job's parts wait for their workers (kept until the job has succeeded)."""
    return Path(settings.MARGINALIA_DATA_DIR) / "imports" / f"job-{job_id}"


def import_work_folders(collection: Collection) -> list[Path]:
    """The work folders its import jobs left (a failed import keeps its parts for a retry)."""
    jobs = Job.objects.filter(kind=IMPORT_KIND, parent=None, parameters__collection_id=collection.pk)
    return [folder for folder in map(work_folder, jobs.values_list("pk", flat=True)) if folder.exists()]


def import_job(collection: Collection) -> Job | None:
    """The job importing `collection` on workers, if it has not succeeded (yet)."""
    return (
        Job.objects.filter(kind=IMPORT_KIND, parent=None, parameters__collection_id=collection.pk)
        .exclude(status=Job.Status.SUCCEEDED)
        .order_by("-pk")
        .first()
    )


def unimported_reason(collection: Collection) -> str | None:
    """Why the collection cannot be ranked yet, in words; None when it is complete."""
    job = import_job(collection)
    if job is None:
        return None
    return f"collection '{collection.name}' is still being imported (job {job.pk} is {job.status})"


@receiver(job_ended)
def empty_collection_of_ended_import(sender, job_id: int, status: str, **kwargs) -> None:
    """An import job failed or was cancelled: the books its parts stored go, the collection
    stays (empty) for a retry or a deletion."""
    job = Job.objects.filter(pk=job_id, kind=IMPORT_KIND, parent=None).first()
    if job is not None:
        empty_collection(job.parameters.get("collection_id"))


def empty_collection(collection_id: int) -> None:
    """Remove every book, passage and query of the collection (its qrels and sentences go with
    them), keeping the collection itself."""
    with transaction.atomic():
        Document.objects.filter(collection_id=collection_id).delete()
        Query.objects.filter(collection_id=collection_id).delete()
        Passage.objects.filter(collection_id=collection_id).delete()
