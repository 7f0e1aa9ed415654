"""Renaming and deleting collections and runs from the staff pages.

Deletion asks the apps above first (`retrieval.signals.deletion_requested`): a study built on a
collection or drawing negatives from a run refuses it, with its name in the message. A collection
or run with a job still pending or running is refused too (cancel the job first). Deleting a
collection also removes what it left on disk: its passage embeddings (one folder per model) and
the BM25 term counts of its candidate sets (content-addressed: a collection with the very same
candidate set simply counts it again on its next run)."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from jobs.models import Job
from retrieval.bm25 import term_counts_key
from retrieval.errors import InputError
from retrieval.models import Collection, Run
from retrieval.services.candidates import candidate_sets
from retrieval.services.import_status import import_job, import_work_folders
from retrieval.services.runs import term_counts_folder
from retrieval.signals import deletion_requested

UNFINISHED = (Run.Status.PENDING, Run.Status.RUNNING)


def deletion_refusals(instance: Collection | Run) -> list[str]:
    """Why `instance` may not be deleted now, in words; empty when it may."""
    reasons = [
        reason
        for _receiver, answer in deletion_requested.send(sender=type(instance), instance=instance)
        for reason in answer or ()
    ]
    runs = [instance] if isinstance(instance, Run) else instance.runs.all()
    unfinished = [run.pk for run in runs if run.status in UNFINISHED]
    if unfinished:
        reasons.append(f"run {', '.join(map(str, unfinished))} has not finished (cancel its job first)")
    importing = import_job(instance) if isinstance(instance, Collection) else None
    if importing is not None and importing.status in (Job.Status.PENDING, Job.Status.RUNNING):
        reasons.append(f"its import (job {importing.pk}) has not finished (cancel its job first)")
    return reasons


def _refuse_if_needed(instance: Collection | Run, what: str) -> None:
    reasons = deletion_refusals(instance)
    if reasons:
        raise InputError(f"{what} cannot be deleted: {'; '.join(reasons)}")


def delete_run(run: Run) -> None:
    """Delete a finished or failed run with its hits and per-query results."""
    _refuse_if_needed(run, f"run {run.pk}")
    with transaction.atomic():
        run.delete()


def rename_collection(collection: Collection, name: str) -> Collection:
    name = name.strip()
    if not name:
        raise InputError("a collection needs a name", field="name")
    if Collection.objects.filter(name=name).exclude(pk=collection.pk).exists():
        raise InputError(f"a collection named {name!r} already exists", field="name")
    collection.name = name
    try:
        with transaction.atomic():
            collection.save(update_fields=["name"])
    except IntegrityError as error:  # a concurrent rename took the name first
        raise InputError(f"a collection named {name!r} already exists", field="name") from error
    return collection


def collection_cache_paths(collection: Collection) -> list[Path]:
    """What `collection` keeps on disk: each model's embedding folder for it, the term counts of
    its candidate sets (those that exist) and what a failed import on workers left."""
    data = Path(settings.MARGINALIA_DATA_DIR)
    embedding_folders = sorted((data / "embeddings").glob(f"*/collection-{collection.pk}"))
    term_counts = [
        term_counts_folder() / f"{term_counts_key([p.retrieval_text for p in candidate_set.passages()])}.npz"
        for candidate_set in candidate_sets(collection)
    ]
    return embedding_folders + [path for path in term_counts if path.exists()] + import_work_folders(collection)


def delete_collection(collection: Collection) -> dict:
    """Delete the collection with everything imported into it and its runs, then its caches on
    disk (after the database commit, so a failed delete leaves them). Returns what went."""
    _refuse_if_needed(collection, f"collection {collection.name!r}")
    caches = collection_cache_paths(collection)
    summary = {"collection": collection.name, "runs": collection.runs.count(), "caches_removed": len(caches)}
    with transaction.atomic():
        collection.delete()
        transaction.on_commit(lambda: _remove(caches))
    return summary


def _remove(paths: list[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
