"""A study's life after creation: close it (annotators get no more work, answers already given
stay), reopen it, or delete it with its items, judgments and quality-control records.

Deleting loses judgments for good, so it takes the study's name typed again as confirmation.
Also the annotation app's answer to `retrieval.signals.deletion_requested`: a collection or run
that a study is built on may not be deleted (see `studies_depending_on`)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from retrieval.errors import InputError
from retrieval.models import Collection, Run

from ..models import Assignment, ItemCandidate, Judgment, PoolHit, Study


def close_study(study: Study) -> Study:
    """Stop handing out work; live claims expire (their annotators cannot submit into a closed
    study anyway), submitted judgments stay and count."""
    with transaction.atomic():
        study.status = Study.Status.CLOSED
        study.save(update_fields=["status"])
        Assignment.objects.filter(item__study=study, state=Assignment.State.ACTIVE).update(
            state=Assignment.State.EXPIRED
        )
    return study


def reopen_study(study: Study) -> Study:
    study.status = Study.Status.OPEN
    study.save(update_fields=["status"])
    return study


def delete_study(study: Study, *, confirm_name: str) -> dict:
    """Delete the study and everything in it once `confirm_name` repeats its name; returns what
    went (name, items, judgments)."""
    if confirm_name.strip() != study.name:
        raise InputError(f"type the study's name, {study.name!r}, to delete it", field="confirm")
    summary = {
        "study": study.name,
        "items": study.items.count(),
        "judgments": Judgment.objects.filter(item__study=study).count(),
    }
    with transaction.atomic():
        study.delete()
    return summary


def studies_depending_on(instance: Collection | Run) -> list[str]:
    """Reasons, one per study, that `instance` must stay: the study is built on the collection,
    or draws its negatives from the run, shows candidates the run found or pools its ranking."""
    if isinstance(instance, Collection):
        studies = Study.objects.filter(collection=instance)
        how = "is built on it"
    else:
        # One EXISTS per relation: a study that uses the run stops at its first candidate or
        # pooled hit from it, where joining every candidate of a 100K-item study cost 0.3 s.
        studies = Study.objects.filter(
            Q(negatives_run=instance)
            | Exists(ItemCandidate.objects.filter(item__study=OuterRef("pk"), source_run=instance))
            | Exists(PoolHit.objects.filter(pair__pool__study=OuterRef("pk"), run=instance))
        )
        how = "uses its rankings"
    return [f"study {study.name!r} {how}" for study in studies.order_by("name")]
