"""`export_run RUN_ID`: the run's hits as TREC run lines (`qid Q0 docid rank score tag`)."""

import os
import sys

from django.core.management.base import BaseCommand, CommandError

from retrieval.errors import InputError
from retrieval.metrics import get_run, trec_run_lines


class Command(BaseCommand):
    help = "Print a run's hits as TREC run lines on stdout."

    def add_arguments(self, parser):
        parser.add_argument("run_id")

    def handle(self, *args, **options):
        try:
            lines = trec_run_lines(get_run(options["run_id"]))
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        try:
            for line in lines:
                self.stdout.write(line)
            self.stdout.flush()
        except BrokenPipeError:
            # The reader stopped early (`export_run 7 | head`): that is not an error of ours.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
