"""`export_study STUDY_ID`: one JSON object per line and per item, in study order: `item`,
`query` (external id), `candidates` (passage external ids in display order), `gold`,
`sources` (candidate -> {"run", "rank"}; the gold's are null) and `role` (work, gold,
qualification); relevance and quotability items add `expected` (a gold or qualification item's
known answer) and `all_sources` (every run rank or pool position that found the pair). Staff
data: it names the gold."""

import json

from django.core.management.base import BaseCommand, CommandError

from annotation.selectors import study_export_rows
from annotation.services import get_study
from marginalia.command_checks import DATA_COMMAND_CHECKS
from retrieval.errors import InputError
from retrieval.input_rules import ascii_int
from retrieval.management.base import write_lines


class Command(BaseCommand):
    requires_system_checks = DATA_COMMAND_CHECKS

    help = "Export a study's items with their candidates, gold and candidate sources, as JSON lines."

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=ascii_int)

    def handle(self, *args, **options):
        try:
            study = get_study(options["study_id"])
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        write_lines(self, (json.dumps(row, sort_keys=True) for row in study_export_rows(study)))
