"""study_report STUDY_ID [--model-run RUN_ID ...] [--json]: the report of the study's kind (proxy:
agreement, human and model accuracy; relevance and quotability: agreement, aggregated labels,
annotators, model-human correlation; preference: scores, agreement, intransitivity, judges,
compatibility and Kendall's tau of the runs against the human ranking)."""

from annotation.services import get_study
from evaluation.formatting import report_as_text
from evaluation.preference_formatting import preference_report_as_text
from evaluation.reports import cached_study_report, resolve_model_runs
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Report agreement, human accuracy or labels, and annotators of a study, and compare model runs."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int, metavar="STUDY_ID")
        parser.add_argument(
            "--model-run",
            dest="model_runs",
            type=int,
            action="extend",
            nargs="+",
            default=[],
            metavar="RUN_ID",
            help=(
                "A run on the study's collection to score on the same items or correlate with the labels (repeatable)."
            ),
        )

    def run(self, *, study_id, model_runs, **options):
        study = get_study(study_id, field="study")
        return cached_study_report(study, resolve_model_runs(study, model_runs))

    def format_text(self, summary):
        if summary["study"]["kind"] == "preference":
            return preference_report_as_text(summary)
        return report_as_text(summary)
