"""The judge reranker as `retrieve` offers it (registered by judges.apps at start-up): its name,
its options, and the dotted path of the work, judges.rerank, which loads the judge's backends
only when a rerank runs."""

from retrieval.rerankers import Reranker


def add_arguments(parser) -> None:
    parser.add_argument("--judge", default=None, help="judge reranker: the judge (default: the embedded local one).")
    parser.add_argument(
        "--objective-file", default=None, help="judge reranker: the task objective (BIRCO's), given as guidelines."
    )


JUDGE_RERANKER = Reranker(
    "judge",
    "Rerank a run's top k by a judge's 0-10 scores (ties: the run's order).",
    add_arguments,
    "judges.rerank.rerank_from_options",
)
