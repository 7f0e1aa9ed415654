"""The annotation app's receivers (connected in apps.py): for signals of the apps below it, for
its own events (item_complete tells an adaptive pool (move-to-front) the outcome of a pair it
drew, and on judgment_submitted adaptive preference studies choose their next pairs, both inside
the submitting transaction), and for its own models' saves where a stored summary must follow
them."""

from django.db.models.signals import post_save
from django.dispatch import receiver

from retrieval.signals import deletion_requested

from .events import item_complete, judgment_submitted
from .models import AdjudicationQueue, Judgment
from .services.lifecycle import studies_depending_on
from .services.pools import record_completion
from .services.preference_scheduling import advance_queries


@receiver(deletion_requested)
def refuse_deleting_what_studies_use(sender, instance, **kwargs) -> list[str]:
    return studies_depending_on(instance)


@receiver(post_save, sender=Judgment)
def mark_adjudication_queue_stale(sender, instance, created, update_fields=None, **kwargs) -> None:
    """A voided judgment no longer counts: the study's adjudication queue shows that a void is
    yet to be followed (its item is marked by the void itself, annotation.services.live_counts,
    and annotation.services.adjudication follows it when the queue is next read). Taken after
    the item's lock, as every writer of the queue's row takes them."""
    if not created and update_fields and "voided" in update_fields:
        AdjudicationQueue.objects.filter(study__items=instance.item_id).update(stale=True)


@receiver(item_complete)
def decide_pooled_pair(sender, item, **kwargs) -> None:
    record_completion(item)


@receiver(judgment_submitted)
def advance_adaptive_preferences(sender, judgment, **kwargs) -> None:
    """Inside the submitting transaction, with the item locked: an adaptive preference study
    materialises the pairs this answer makes due (nothing for any other study)."""
    item = judgment.item
    advance_queries(item.study, [item.query_id])
