"""export_judge_answers STUDY_ID [--judge NAME]: the study's judge answers as JSON lines, apart
from the judgments (export_study / /api/judgments/): judge, version, backend, item, query, sample,
position and choice (proxy) or label / score, failure_reason, raw_response, prompt_hash, tokens,
seconds."""

import json

from django.core.management.base import BaseCommand, CommandError

from annotation.services import get_study
from judges.selectors import judge_answer_rows
from judges.services import get_judge
from marginalia.command_checks import DATA_COMMAND_CHECKS
from retrieval.errors import InputError


class Command(BaseCommand):
    requires_system_checks = DATA_COMMAND_CHECKS

    help = "Export a study's judge answers (one JSON object per line)."

    def add_arguments(self, parser):
        parser.add_argument("study_id", type=int, metavar="STUDY_ID")
        parser.add_argument("--judge", default=None, help="Only this judge (its latest version).")

    def handle(self, *args, study_id, judge, **options):
        try:
            rows = judge_answer_rows(get_study(study_id, field="study"), get_judge(judge) if judge else None)
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        for row in rows:
            self.stdout.write(json.dumps(row, sort_keys=True))
