"""study_report STUDY_ID [--model-run RUN_ID ...] [--json]: agreement, human and model accuracy."""
from evaluation.formatting import report_as_text
from evaluation.services import cached_study_report, proxy_study, resolve_model_runs
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Report agreement, majority and annotator accuracy of a proxy study, and compare model runs."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int, metavar="STUDY_ID")
        parser.add_argument(
            "--model-run", dest="model_runs", type=int, action="extend", nargs="+", default=[], metavar="RUN_ID",
            help="A run on the study's collection to score on the same items (repeatable).",
        )

    def run(self, *, study_id, model_runs, **options):
        study = proxy_study(study_id)
        return cached_study_report(study, resolve_model_runs(study, model_runs))

    def format_text(self, summary):
        return report_as_text(summary)
