"""`evaluate_run RUN_ID [--metrics "R@20 nDCG@10 AP Bpref ..."] [--qrels SOURCE] [--coverage-threshold
T] [--per-query] [--by FIELD ...]`: retrieval metrics with standard errors under any qrels source,
overall, by quote length and by any query field, with Judged@k and a coverage warning; per-query
values on request."""

from retrieval.management.base import JsonCommand
from retrieval.measures import HELP
from retrieval.metrics import evaluate_run
from retrieval.qrels_sources import source_help
from retrieval.selectors import get_run


class Command(JsonCommand):
    help = "Retrieval metrics of a finished run, with standard errors and Judged@k."

    def add_command_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("--metrics", default="", help=f"Space- or comma-separated; {HELP} (default: the usual).")
        parser.add_argument("--qrels", default=None, help=f"Whose labels: {source_help()} (default imported).")
        parser.add_argument(
            "--coverage-threshold",
            default=None,
            help="Warn when a mean Judged@k is below this share (default MARGINALIA_COVERAGE_THRESHOLD).",
        )
        parser.add_argument(
            "--per-query", action="store_true", help="Add every query's values (per_query, judged_per_query)."
        )
        parser.add_argument(
            "--by", action="append", default=[], help="Break down by a query field (split, or a metadata key)."
        )

    def run(self, **options):
        return evaluate_run(
            get_run(options["run_id"]),
            options["metrics"],
            per_query=options["per_query"],
            by=options["by"],
            qrels=options["qrels"],
            threshold=options["coverage_threshold"],
        )

    def format_text(self, summary: dict) -> str:
        beyond = set(summary["beyond_depth"])

        def table(block: dict) -> list[str]:
            return [
                f"  {name:12s} {value:10.4f}"
                + (f" ± {block['stderr'][name]:.4f}" if block["stderr"][name] is not None else "")
                + ("  (reads ranks past the stored depth)" if name in beyond else "")
                for name, value in block["metrics"].items()
                if value is not None
            ]

        lines = [
            f"run {summary['run_id']} under {summary['qrels']}: {summary['queries']} judged queries"
            f" ({summary['queries_without_relevant']} without a relevant passage count as 0;"
            f" {summary['queries_without_judgments']} without judgments left out)",
            *table(summary),
            "  " + "  ".join(f"Judged@{k} {value:.4f}" for k, value in summary["judged"].items() if value is not None),
        ]
        if summary["coverage"]["warning"]:
            lines.append(f"warning: {summary['coverage']['warning']}")
        for length, block in summary["by_quote_length"].items():
            lines += [f"quote length {length}: {block['queries']} queries", *table(block)]
        for name, groups in summary.get("by", {}).items():
            for value, block in groups.items():
                lines += [f"{name} = {value}: {block['queries']} queries", *table(block)]
        if "per_query" in summary:
            keys = list(summary["metrics"])
            lines += ["\t".join(["query", *keys])]
            lines += [
                "\t".join([query, *("-" if values[key] is None else f"{values[key]:.6g}" for key in keys)])
                for query, values in summary["per_query"].items()
            ]
        return "\n".join(lines)
