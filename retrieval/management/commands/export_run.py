"""`export_run RUN_ID`: the run's hits as TREC run lines (`qid Q0 docid rank score tag`)."""

from django.core.management.base import BaseCommand, CommandError

from marginalia.command_checks import DATA_COMMAND_CHECKS
from retrieval.errors import InputError
from retrieval.management.base import write_lines
from retrieval.selectors import get_run, trec_run_lines


class Command(BaseCommand):
    requires_system_checks = DATA_COMMAND_CHECKS

    help = "Print a run's hits as TREC run lines on stdout."

    def add_arguments(self, parser):
        parser.add_argument("run_id")

    def handle(self, *args, **options):
        try:
            lines = trec_run_lines(get_run(options["run_id"]))
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        write_lines(self, lines)
