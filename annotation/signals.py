"""The annotation app's receivers: for signals of the apps below it (connected in apps.py), and
for its own item_complete, which tells an adaptive pool (move-to-front) the outcome of a pair it
drew, inside the submitting transaction."""

from django.dispatch import receiver

from retrieval.signals import deletion_requested

from .events import item_complete
from .services.lifecycle import studies_depending_on
from .services.pools import record_completion


@receiver(deletion_requested)
def refuse_deleting_what_studies_use(sender, instance, **kwargs) -> list[str]:
    return studies_depending_on(instance)


@receiver(item_complete)
def decide_pooled_pair(sender, item, **kwargs) -> None:
    record_completion(item)
