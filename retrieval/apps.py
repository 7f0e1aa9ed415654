from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    verbose_name = "Retrieval: corpora, queries, runs"

    def ready(self):
        # Connects the receivers that settle a run when its job fails, is cancelled or retried.
        from retrieval.services import run_status  # noqa: F401
