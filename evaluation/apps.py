from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Evaluation: agreement and reports"

    def ready(self):
        """Offer a study's and a judge's labels as qrels to every table that reads qrels
        (retrieval cannot import evaluation); named by dotted path, loaded when asked for."""
        from retrieval.qrels_sources import QrelsSource, register_qrels_source

        register_qrels_source(
            QrelsSource(
                "study",
                "study:ID[:majority|mean|median]",
                "evaluation.qrels_sources.study_qrels",
                "evaluation.qrels_sources.study_choices",
            )
        )
        register_qrels_source(
            QrelsSource(
                "judge", "judge:NAME", "evaluation.qrels_sources.judge_qrels", "evaluation.qrels_sources.judge_choices"
            )
        )
