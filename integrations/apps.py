from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations: invitations, crowd participants, webhooks"

    def ready(self):
        # Connect the webhook receivers to the lower apps' events (annotation.events, jobs.events).
        from . import receivers  # noqa: F401
