"""`train_retriever --collection NAME --name NAME [...]`: fine-tune a dense retriever on a
collection's training queries (early stopping on its validation queries) and register it, so
`retrieve --retriever dense --model NAME` can use it."""

from jobs.progress import terminal_progress
from retrieval.management.arguments import add_context_argument, collection_named, context_option
from retrieval.management.base import JsonCommand
from retrieval.management.training_arguments import add_training_arguments, job_summary, training_parameters
from retrieval.training_jobs import start_training_async


class Command(JsonCommand):
    help = "Fine-tune a dense retriever on a collection (contrastive, same-book batches) and register it."

    def add_command_arguments(self, parser):
        parser.add_argument("--collection", required=True, help="Collection whose train/validation queries to use.")
        add_context_argument(parser)
        add_training_arguments(parser)

    def run(self, **options):
        context = context_option(options)
        collection = collection_named(options["collection"])
        parameters = {**training_parameters(options), **context}
        from retrieval.training import train_retriever  # torch loads only here

        if options["run_async"]:
            return job_summary(start_training_async(collection, **parameters))
        return train_retriever(collection, **parameters, progress=terminal_progress(f"train {parameters['name']}"))
