"""The annotation app's receivers (connected in apps.py): for signals of the apps below it, and
its own judgment event, on which adaptive preference studies choose their next pairs."""

from django.dispatch import receiver

from retrieval.signals import deletion_requested

from .events import judgment_submitted
from .services.lifecycle import studies_depending_on
from .services.preference_scheduling import advance_queries


@receiver(deletion_requested)
def refuse_deleting_what_studies_use(sender, instance, **kwargs) -> list[str]:
    return studies_depending_on(instance)


@receiver(judgment_submitted)
def advance_adaptive_preferences(sender, judgment, **kwargs) -> None:
    """Inside the submitting transaction, with the item locked: an adaptive preference study
    materialises the pairs this answer makes due (nothing for any other study)."""
    item = judgment.item
    advance_queries(item.study, [item.query_id])
