from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    verbose_name = "Retrieval: corpora, queries, runs"

    def ready(self):
        # Connects the receivers that settle a run when its job fails, is cancelled or retried, and
        # an import spread over workers when its job fails or is cancelled.
        from retrieval.services import import_status, run_status  # noqa: F401
