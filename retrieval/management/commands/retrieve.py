"""`retrieve --collection NAME --retriever bm25|dense [...]`: rank a collection's queries and store
the run (inline, or on a Celery worker with --async)."""

from jobs.progress import terminal_progress
from retrieval.bm25 import DEFAULT_B, DEFAULT_K1
from retrieval.management.arguments import add_context_argument, collection_named, context_option
from retrieval.management.base import JsonCommand
from retrieval.services.runs import (
    DEFAULT_DEPTH,
    create_run,
    execute_run,
    get_or_create_retriever,
    run_summary,
    start_run_async,
)


class Command(JsonCommand):
    help = "Rank every query of a collection against its candidate set with BM25 or a dense model."

    def add_command_arguments(self, parser):
        parser.add_argument("--collection", required=True, help="Collection name.")
        parser.add_argument("--retriever", required=True, choices=["bm25", "dense"])
        parser.add_argument(
            "--model",
            default="",
            help="Dense model: folder, Hugging Face name, or a registered retriever's id or name.",
        )
        parser.add_argument("--k1", type=float, default=DEFAULT_K1)
        parser.add_argument("--b", type=float, default=DEFAULT_B)
        add_context_argument(parser)
        parser.add_argument("--depth", type=int, default=DEFAULT_DEPTH, help="Hits stored per query.")
        parser.add_argument(
            "--query-prompt",
            default=None,
            help='Dense: text put before each query, e.g. "query: " (default: the model\'s own).',
        )
        parser.add_argument(
            "--passage-prompt",
            default=None,
            help='Dense: text put before each passage, e.g. "passage: " (default: the model\'s own).',
        )
        parser.add_argument("--async", dest="run_async", action="store_true", help="Send the run to a Celery worker.")

    def run(self, **options):
        context = context_option(options)
        collection = collection_named(options["collection"])
        retriever = get_or_create_retriever(
            options["retriever"], k1=options["k1"], b=options["b"], model=options["model"]
        )
        parameters = {
            **context,
            "depth": options["depth"],
            "query_prompt": options["query_prompt"],
            "passage_prompt": options["passage_prompt"],
        }
        if options["run_async"]:
            run = start_run_async(collection, retriever, **parameters)
            return {"run_id": run.pk, "job_id": run.job_id}
        run = create_run(collection, retriever, **parameters)
        return run_summary(execute_run(run, terminal_progress(f"retrieve {retriever.name}")))
