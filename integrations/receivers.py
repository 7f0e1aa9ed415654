"""Where the lower apps' events (annotation.events, evaluation.events, jobs.events) become webhook
deliveries: each signal writes its outbox rows inside the sender's transaction and queues them for
a worker once that commits. Connected when the app is ready (IntegrationsConfig.ready).

Every process imports this module at start, so it names the queueing function instead of
importing it: queueing loads Celery (about 0.2 s), which only a process that sends an event
with a webhook listening needs."""

from django.db import transaction
from django.dispatch import receiver
from django.utils.module_loading import import_string

from annotation.events import annotator_flagged, item_complete, judgment_submitted, study_complete
from evaluation.events import agreement_low
from jobs.events import job_finished
from jobs.models import Job

from . import payloads
from .services.outbox import enqueue

QUEUE_DELIVERIES = "integrations.tasks.queue_deliveries"


def announce(event: str, payload: dict, *, study_id: int | None = None) -> None:
    delivery_ids = enqueue(event, payload, study_id=study_id)
    if delivery_ids:
        transaction.on_commit(lambda: import_string(QUEUE_DELIVERIES)(delivery_ids), robust=True)


@receiver(judgment_submitted, dispatch_uid="integrations.judgment_submitted")
def on_judgment_submitted(sender, judgment, **kwargs):
    announce("judgment.submitted", payloads.judgment(judgment), study_id=judgment.item.study_id)


@receiver(item_complete, dispatch_uid="integrations.item_complete")
def on_item_complete(sender, item, **kwargs):
    announce("item.complete", payloads.item(item), study_id=item.study_id)


@receiver(study_complete, dispatch_uid="integrations.study_complete")
def on_study_complete(sender, study, **kwargs):
    announce("study.complete", payloads.study(study), study_id=study.pk)


@receiver(annotator_flagged, dispatch_uid="integrations.annotator_flagged")
def on_annotator_flagged(sender, flag, **kwargs):
    announce("annotator.flagged", payloads.flag(flag), study_id=flag.study_id)


@receiver(agreement_low, dispatch_uid="integrations.agreement_low")
def on_agreement_low(sender, study, scope, annotator, measure, value, threshold, evidence, checked_at, **kwargs):
    figures = payloads.agreement(study, scope, annotator, measure, value, threshold, evidence, checked_at)
    announce(f"{scope}.agreement_low", figures, study_id=study.pk)


@receiver(job_finished, dispatch_uid="integrations.job_finished")
def on_job_finished(sender, job, **kwargs):
    announce("job.failed" if job.status == Job.Status.FAILED else "job.finished", payloads.job(job))
