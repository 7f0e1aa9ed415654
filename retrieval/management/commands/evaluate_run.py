"""`evaluate_run RUN_ID`: recall@k, mean rank, MRR@10, nDCG@10 and N-RODCG@10 with standard
errors, overall and by quote length."""

from retrieval.management.base import JsonCommand
from retrieval.metrics import evaluate_run, get_run


class Command(JsonCommand):
    help = "Retrieval metrics of a finished run, with standard errors."

    def add_command_arguments(self, parser):
        parser.add_argument("run_id")

    def run(self, **options):
        return evaluate_run(get_run(options["run_id"]))

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
        return "\n".join(lines)
