"""`import_book PATH --title T [--author A] [--collection NAME] [--json]`: a plain-text book as
sentences and 1..5-sentence windows."""

from jobs.progress import terminal_progress
from retrieval.management.base import JsonCommand
from retrieval.services.importers import import_book


class Command(JsonCommand):
    help = "Import a plain-text book (Project Gutenberg boilerplate removed) as sentences and windows."

    def add_command_arguments(self, parser):
        parser.add_argument("path", help="UTF-8 text file.")
        parser.add_argument("--title", required=True)
        parser.add_argument("--author", default="")
        parser.add_argument("--collection", help="Collection name (default: the title).")

    def run(self, **options):
        return import_book(
            options["path"],
            title=options["title"],
            author=options["author"],
            collection_name=options["collection"],
            progress=terminal_progress("import_book"),
        )
