"""The `data` of each webhook event: ids and what an organiser's pipeline needs to act, built
from explicit fields. Webhooks are registered by staff, so a judgment names its annotator."""

from annotation.models import AnnotatorFlag, Item, Judgment, Study
from jobs.models import Job


def judgment(judgment: Judgment) -> dict:
    return {
        "study": judgment.item.study_id,
        "item": judgment.item_id,
        "judgment": judgment.pk,
        "annotator": judgment.annotator.username,
        "choice_position": judgment.choice.position if judgment.choice_id else None,
        "label": judgment.label,
        "selections": judgment.selections,
        "spans": judgment.spans,
        "rubric": judgment.rubric,
        "rationale": judgment.rationale,
        "seconds": judgment.seconds,
        "submitted_at": judgment.submitted_at.isoformat(),
    }


def item(item: Item) -> dict:
    return {"study": item.study_id, "item": item.pk, "position": item.position}


def study(study: Study) -> dict:
    return {"study": study.pk, "name": study.name, "kind": study.kind, "items": study.items.count()}


def flag(flag: AnnotatorFlag) -> dict:
    return {
        "study": flag.study_id,
        "flag": flag.pk,
        "annotator": flag.annotator.username,
        "reason": flag.reason,
        "value": flag.value,
        "threshold": flag.threshold,
    }


def agreement(study: Study, scope: str, annotator, measure, value, threshold, evidence, checked_at) -> dict:
    """A study's (scope "study") or an annotator's (scope "annotator") agreement fell below the
    threshold staff set: the measure, its value, the threshold and the units or pairs behind it."""
    return {
        "study": study.pk,
        "name": study.name,
        "scope": scope,
        "annotator": annotator,
        "measure": measure,
        "value": value,
        "threshold": threshold,
        "evidence": evidence,
        "checked_at": checked_at.isoformat(),
    }


def job(job: Job) -> dict:
    return {
        "job": job.pk,
        "kind": job.kind,
        "status": job.status,
        "error": job.error.splitlines()[0] if job.error else "",
        "result": job.result,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }
