"""`export_run RUN_ID [--ranks]`: the run's hits as TREC run lines (`qid Q0 docid rank score tag`);
with --ranks what evaluate_run reads beyond them: one JSON line per query with the exact rank of
every relevant passage over the whole candidate set (retrieval.selectors.relevant_rank_lines)."""

from django.core.management.base import BaseCommand, CommandError

from marginalia.command_checks import DATA_COMMAND_CHECKS
from retrieval.errors import InputError
from retrieval.management.base import write_lines
from retrieval.selectors import get_run, relevant_rank_lines, trec_run_lines


class Command(BaseCommand):
    requires_system_checks = DATA_COMMAND_CHECKS

    help = "Print a run's hits as TREC run lines on stdout (--ranks: its relevant passages' exact ranks)."

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument(
            "--ranks",
            action="store_true",
            help="Print, per query, the exact rank of every relevant passage over the whole candidate set "
            "(JSON lines): what evaluate_run reads beyond the stored hits.",
        )

    def handle(self, *args, **options):
        try:
            run = get_run(options["run_id"])
            lines = relevant_rank_lines(run) if options["ranks"] else trec_run_lines(run)
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        write_lines(self, lines)
