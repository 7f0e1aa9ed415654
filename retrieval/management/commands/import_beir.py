"""`import_beir DIR --collection NAME [--json]`: a BEIR-style folder (corpus, queries, qrels,
optional per-query pools) as one collection."""

from jobs.progress import terminal_progress
from retrieval.management.base import JsonCommand
from retrieval.services.importers import import_beir


class Command(JsonCommand):
    help = "Import a BEIR-style folder: corpus.jsonl, queries.jsonl, qrels.tsv or qrels/test.tsv, pools.jsonl."

    def add_command_arguments(self, parser):
        parser.add_argument("directory", help="Folder with corpus.jsonl, queries.jsonl and qrels.")
        parser.add_argument("--collection", required=True, help="Name of the new collection.")

    def run(self, **options):
        return import_beir(
            options["directory"], collection_name=options["collection"], progress=terminal_progress("import_beir")
        )
