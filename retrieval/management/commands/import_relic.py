"""`import_relic PATH [--collection NAME] [--split test] [--async] [--json]`: RELiC JSON (books,
quotes with their contexts, candidate windows) as one collection, in this process or, with
--async, as one job per book over the workers."""

from jobs.progress import terminal_progress
from retrieval.management.base import JsonCommand
from retrieval.services.import_jobs import start_relic_import
from retrieval.services.importers import import_relic


class Command(JsonCommand):
    help = "Import a RELiC JSON file: books, their candidate windows, and one query per quote."

    def add_command_arguments(self, parser):
        parser.add_argument("path", help="RELiC JSON file (book -> quotes, sentences, candidates).")
        parser.add_argument("--collection", help="Collection name (default: the file name without extension).")
        parser.add_argument("--split", default="test", help="Split recorded on every query (default: test).")
        parser.add_argument(
            "--async", dest="run_async", action="store_true", help="Import one book per job on the Celery workers."
        )

    def run(self, **options):
        if options["run_async"]:
            job = start_relic_import(options["path"], collection_name=options["collection"], split=options["split"])
            return {"collection": job.parameters["collection"], "job_id": job.pk, "parts": job.parameters["parts"]}
        return import_relic(
            options["path"],
            collection_name=options["collection"],
            split=options["split"],
            progress=terminal_progress("import_relic"),
        )
