"""`import_relic PATH [--collection NAME] [--split test] [--json]`: RELiC JSON (books, quotes with
their contexts, candidate windows) as one collection."""

from jobs.progress import terminal_progress
from retrieval.management.base import JsonCommand
from retrieval.services.importers import import_relic


class Command(JsonCommand):
    help = "Import a RELiC JSON file: books, their candidate windows, and one query per quote."

    def add_command_arguments(self, parser):
        parser.add_argument("path", help="RELiC JSON file (book -> quotes, sentences, candidates).")
        parser.add_argument("--collection", help="Collection name (default: the file name without extension).")
        parser.add_argument("--split", default="test", help="Split recorded on every query (default: test).")

    def run(self, **options):
        return import_relic(
            options["path"],
            collection_name=options["collection"],
            split=options["split"],
            progress=terminal_progress("import_relic"),
        )
