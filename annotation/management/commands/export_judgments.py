"""`export_judgments STUDY_ID [--format jsonl|csv|json]`: every judgment of the study (voided ones
flagged), the rows of `GET /api/judgments/?study=ID`, streamed to stdout. Staff data."""

from django.core.management.base import BaseCommand, CommandError

from annotation.exports import JUDGMENT_FORMATS, judgment_export
from annotation.services import get_study
from marginalia.command_checks import DATA_COMMAND_CHECKS
from retrieval.errors import InputError
from retrieval.input_rules import ascii_int


class Command(BaseCommand):
    requires_system_checks = DATA_COMMAND_CHECKS

    help = "Export a study's judgments as JSON lines (default), CSV or one JSON array, streamed."

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=ascii_int)
        parser.add_argument("--format", choices=JUDGMENT_FORMATS, default="jsonl")

    def handle(self, *args, **options):
        try:
            study = get_study(options["study_id"])
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        for chunk in judgment_export(study, options["format"]):
            self.stdout.write(chunk, ending="")
