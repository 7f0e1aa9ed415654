"""`import_answers FILE --collection NAME [--queries-from COLLECTION] [--json]`: generated answers
(JSONL: query, system, text) into an answers collection, one run per system -> keys `collection`,
`systems` (name -> run id), `queries`, `answers`."""

from jobs.progress import terminal_progress
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand
from retrieval.services.answers_import import import_answers


class Command(JsonCommand):
    help = "Import generated answers (JSONL: query, system, text) into an answers collection, one run per system."

    def add_command_arguments(self, parser):
        parser.add_argument("file", help="JSONL: {query, system, text[, query_text]} per line.")
        parser.add_argument("--collection", required=True, help="The answers collection (created when new).")
        parser.add_argument("--queries-from", help="Collection whose queries the answers answer (copied over).")

    def run(self, **options):
        source = options["queries_from"]
        return import_answers(
            options["file"],
            collection_name=options["collection"],
            queries_from=collection_named(source, field="--queries-from") if source else None,
            progress=terminal_progress("import_answers"),
        )

    def format_text(self, summary):
        systems = ", ".join(f"{name} (run {run_id})" for name, run_id in summary["systems"].items())
        return f"{summary['answers']} answers to {summary['queries']} queries in '{summary['collection']}': {systems}"
