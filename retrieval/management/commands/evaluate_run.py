"""`evaluate_run RUN_ID [--metrics "R@20 nDCG@10 MAP ..."] [--per-query] [--by FIELD ...]`: retrieval
metrics with standard errors, overall, by quote length and by any query field; per-query values on
request."""

from retrieval.management.base import JsonCommand
from retrieval.metrics import evaluate_run
from retrieval.selectors import get_run


class Command(JsonCommand):
    help = "Retrieval metrics of a finished run, with standard errors."

    def add_command_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument(
            "--metrics",
            default="",
            help='ir-measures / trec_eval names, e.g. "R@20 nDCG@10 MRR@100 MAP P@5 N-RODCG@1" (default: the usual).',
        )
        parser.add_argument("--per-query", action="store_true", help="Add every query's values (key per_query).")
        parser.add_argument(
            "--by", action="append", default=[], help="Break down by a query field (split, or a metadata key)."
        )

    def run(self, **options):
        return evaluate_run(
            get_run(options["run_id"]), options["metrics"], per_query=options["per_query"], by=options["by"]
        )

    def format_text(self, summary: dict) -> str:
        def table(block: dict) -> list[str]:
            return [
                f"  {name:12s} {value:10.4f}"
                + (f" ± {block['stderr'][name]:.4f}" if block["stderr"][name] is not None else "")
                for name, value in block["metrics"].items()
                if value is not None
            ]

        lines = [
            f"run {summary['run_id']}: {summary['queries']} queries"
            f" ({summary['queries_without_relevant']} without a relevant passage left out)",
            *table(summary),
        ]
        for length, block in summary["by_quote_length"].items():
            lines += [f"quote length {length}: {block['queries']} queries", *table(block)]
        for name, groups in summary.get("by", {}).items():
            for value, block in groups.items():
                lines += [f"{name} = {value}: {block['queries']} queries", *table(block)]
        if "per_query" in summary:
            keys = list(summary["metrics"])
            lines += ["\t".join(["query", *keys])]
            lines += [
                "\t".join([query, *(f"{values[key]:.6g}" for key in keys)])
                for query, values in summary["per_query"].items()
            ]
        return "\n".join(lines)
