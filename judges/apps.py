from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges: models and LLMs answering studies beside the experts"

    def ready(self):
        """Offer the judge reranker to `retrieve --retriever judge` (retrieval cannot import judges)."""
        from retrieval.rerankers import register_reranker

        from .reranker import JUDGE_RERANKER

        register_reranker(JUDGE_RERANKER)
