from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations: invitations, crowd participants, webhooks"

    def ready(self):
        # Connect the webhook receivers to the lower apps' events (annotation.events, jobs.events),
        # and the revocation of API tokens to password changes.
        from . import identity, receivers  # noqa: F401
