"""`import_run COLLECTION FILE --name NAME [--json]`: a TREC run file made by any system as one of
the collection's runs -> keys `run_id`, `queries`, `hits`, `not_retrieved`."""

from jobs.progress import terminal_progress
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand
from retrieval.services.external_runs import imported_run_summary
from retrieval.services.trec_files import import_trec_run


class Command(JsonCommand):
    help = "Import a TREC run file (qid Q0 docid rank score tag) as a named run of a collection."

    def add_command_arguments(self, parser):
        parser.add_argument("collection", help="Collection name.")
        parser.add_argument("file", help="TREC run file, one tag.")
        parser.add_argument("--name", required=True, help="The run's name, new in the collection.")

    def run(self, **options):
        collection = collection_named(options["collection"])
        run = import_trec_run(
            collection, options["file"], name=options["name"], progress=terminal_progress("import_run")
        )
        return imported_run_summary(run)
