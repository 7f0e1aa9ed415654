"""`retrieve --collection NAME --retriever bm25|dense [...]`: rank a collection's queries and store
the run (inline, or on a Celery worker with --async). `retrieve --retriever NAME --run RUN_ID
[--depth k]` reranks a run's top k with a reranker another app registered (retrieval.rerankers;
e.g. `--retriever judge --judge NAME`)."""

from jobs.progress import terminal_progress
from retrieval.bm25 import DEFAULT_B, DEFAULT_K1
from retrieval.errors import InputError
from retrieval.management.arguments import add_context_argument, collection_named, context_option
from retrieval.management.base import JsonCommand
from retrieval.rerankers import RERANKERS, rerank_with
from retrieval.selectors import get_run
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
        parser.add_argument("--collection", help="Collection name (bm25 and dense).")
        parser.add_argument("--retriever", required=True, choices=["bm25", "dense", *RERANKERS])
        parser.add_argument("--run", type=int, metavar="RUN_ID", help="The run a reranker reorders.")
        for reranker in RERANKERS.values():
            reranker.add_arguments(parser)
        parser.add_argument(
            "--model",
            default="",
            help="Dense model: folder, Hugging Face name, or a registered retriever's id or name.",
        )
        parser.add_argument("--k1", type=float, default=DEFAULT_K1)
        parser.add_argument("--b", type=float, default=DEFAULT_B)
        add_context_argument(parser)
        parser.add_argument(
            "--depth", type=int, default=None, help=f"Hits stored per query ({DEFAULT_DEPTH}); a reranker's top k."
        )
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
        if options["retriever"] in RERANKERS:
            if options["run"] is None:
                raise InputError(f"--retriever {options['retriever']} reorders a run: give --run RUN_ID", field="run")
            run = get_run(options["run"], field="run")
            progress = terminal_progress(f"rerank run {run.pk} with {options['retriever']}")
            return rerank_with(options["retriever"], run, options["depth"], options, progress)
        if not options["collection"]:
            raise InputError("required for bm25 and dense runs", field="collection")
        context = context_option(options)
        collection = collection_named(options["collection"])
        retriever = get_or_create_retriever(
            options["retriever"], k1=options["k1"], b=options["b"], model=options["model"]
        )
        parameters = {
            **context,
            "depth": options["depth"] or DEFAULT_DEPTH,
            "query_prompt": options["query_prompt"],
            "passage_prompt": options["passage_prompt"],
        }
        if options["run_async"]:
            run = start_run_async(collection, retriever, **parameters)
            self.warn(run)
            return {"run_id": run.pk, "job_id": run.job_id}
        run = create_run(collection, retriever, **parameters)
        self.warn(run)
        return run_summary(execute_run(run, terminal_progress(f"retrieve {retriever.name}")))

    def warn(self, run) -> None:
        """A setting the run ignores, said on stderr before it starts (the summary's keys stay the
        contract's; the run keeps the warning in its parameters)."""
        for warning in run.parameters.get("warnings", []):
            self.stderr.write(f"warning: {warning}")
