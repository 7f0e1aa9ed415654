"""The annotation app's receivers for signals of the apps below it (connected in apps.py)."""

from django.dispatch import receiver

from retrieval.signals import deletion_requested

from .services.lifecycle import studies_depending_on


@receiver(deletion_requested)
def refuse_deleting_what_studies_use(sender, instance, **kwargs) -> list[str]:
    return studies_depending_on(instance)
