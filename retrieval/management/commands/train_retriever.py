"""`train_retriever --collection NAME --name NAME [...]`: fine-tune a dense retriever on a
collection's training queries (early stopping on its validation queries) and register it, so
`retrieve --retriever dense --model NAME` can use it."""
from retrieval.errors import InputError
from retrieval.jobs import terminal_progress
from retrieval.management.base import JsonCommand
from retrieval.management.training_arguments import add_training_arguments, job_summary, training_parameters
from retrieval.models import Collection
from retrieval.services.runs import parse_context


class Command(JsonCommand):
    help = "Fine-tune a dense retriever on a collection (contrastive, same-book batches) and register it."

    def add_command_arguments(self, parser):
        parser.add_argument("--collection", required=True, help="Collection whose train/validation queries to use.")
        parser.add_argument("--context", default="4/4", help="Sentences of context left/right of the mask, e.g. 4/4.")
        add_training_arguments(parser)

    def run(self, **options):
        context_left, context_right = parse_context(options["context"])
        try:
            collection = Collection.objects.get(name=options["collection"])
        except Collection.DoesNotExist:
            raise InputError(f"no collection named {options['collection']!r}", field="collection") from None
        parameters = {**training_parameters(options), "context_left": context_left, "context_right": context_right}
        from retrieval.training import start_training_async, train_retriever  # torch loads only here

        if options["run_async"]:
            return job_summary(start_training_async(collection, **parameters))
        return train_retriever(collection, **parameters, progress=terminal_progress(f"train {parameters['name']}"))
