"""`export_collection COLLECTION OUT [--qrels imported|study:ID|judge:NAME] [--json]`: the collection
as a bundle a peer can load, in the new folder OUT: a BEIR folder (corpus, queries, qrels, pools),
the judgments behind every qrel, the pool's provenance and ir_datasets-style TREC files
(evaluation/bundles.py) -> keys `collection`, `qrels`, `out`, `files`, `queries`, `passages`,
`qrels_pairs`, `relevant`."""

from evaluation.bundles import write_bundle
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand
from retrieval.qrels_sources import load_qrels, source_help


class Command(JsonCommand):
    help = "Write a collection as a BEIR folder with judgments, pool provenance and TREC files."

    def add_command_arguments(self, parser):
        parser.add_argument("collection", help="Collection name.")
        parser.add_argument("out", help="A new (or empty) folder.")
        parser.add_argument("--qrels", default=None, help=f"Whose labels: {source_help()} (default imported).")

    def run(self, **options):
        collection = collection_named(options["collection"])
        return write_bundle(collection, load_qrels(collection, options["qrels"]), options["out"])
