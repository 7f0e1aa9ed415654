"""`import_judgments STUDY_ID FILE.jsonl [--json]` -> `imported`, `rejected`.

Rows: {"item": id, "annotator": name, "choice": passage external id} for proxy studies; for label
studies "label" (or "selections" for multi-select), with "spans", "rubric", "rationale" as the
study's schema asks; optionally "seconds". The whole file is one transaction: any bad row is an error
naming the file, line and field, and nothing is written. Rows identical to judgments already
stored are skipped and counted as `rejected`, so on a first import `rejected` is 0."""

from annotation.services import get_study, import_judgments
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Import judgments from a JSON-lines file into a study (all or nothing)."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument(
            "file", help="JSON lines: item, annotator, choice | label/selections (+ spans, rubric, rationale), seconds."
        )

    def run(self, **options):
        return import_judgments(get_study(options["study_id"]), options["file"]).summary()
