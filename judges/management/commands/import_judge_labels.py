"""import_judge_labels NAME FILE --collection C [--json]: a TREC qrels file (`qid 0 docid grade`
or `qid docid grade`: UMBRELA's output, a track's automatic qrels, another lab's assessors)
stored as the labels of the judge NAME on collection C, versioned like any judge (another file
is a new version; the same file again changes nothing), read as qrels by `--qrels judge:NAME`.
Keys `judge`, `labels`, `version`, `collection`, `queries`, `relevant`, `new`. A bad line: one
line naming the file, line and field, nothing written."""

from judges.pools import import_judge_labels
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Import a TREC qrels file as a judge's labels on a collection."

    def add_command_arguments(self, parser):
        parser.add_argument("name", help="The judge's name.")
        parser.add_argument("file", help="TREC qrels: qid 0 docid grade (or qid docid grade).")
        parser.add_argument("--collection", required=True, help="Collection name.")

    def run(self, *, name, file, collection, **options):
        return import_judge_labels(name, file, collection_named(collection))
