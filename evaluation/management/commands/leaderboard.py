"""`leaderboard COLLECTION --runs A,B,C [--qrels imported|study:ID|judge:NAME] [--metrics "nDCG@10
P@5"] [--leave-one-out DEPTH] [--coverage-threshold T] [--format text|csv|latex] [--json]`: runs of
a collection ranked under one qrels source, with standard errors, Judged@k beside every metric,
paired tests and leave-one-run-out (evaluation.leaderboard) -> keys `runs` (run id -> {name,
metrics, judged, ...}), `ranking` (metric -> run ids, best first), `leave_one_out`, `kendall_tau`.
--format csv|latex prints the paper's table instead (evaluation.leaderboard_exports)."""

from evaluation.aggregates import LEADERBOARD_METRICS
from evaluation.comparison import DEFAULT_PERMUTATIONS
from evaluation.leaderboard import leaderboard
from evaluation.leaderboard_exports import leaderboard_csv, leaderboard_latex
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand
from retrieval.measures import HELP
from retrieval.qrels_sources import source_help

EXPORTS = {"csv": leaderboard_csv, "latex": leaderboard_latex}


class Command(JsonCommand):
    help = "Rank runs of a collection by any metrics under one qrels source (a paper's results table)."

    def add_command_arguments(self, parser):
        parser.add_argument("collection", help="Collection name.")
        parser.add_argument("--runs", required=True, help="Comma-separated run ids (at least two).")
        parser.add_argument("--qrels", default=None, help=f"Whose labels: {source_help()} (default imported).")
        parser.add_argument("--metrics", default="", help=f"{HELP} (default: {' '.join(LEADERBOARD_METRICS)}).")
        parser.add_argument(
            "--leave-one-out",
            default=None,
            metavar="DEPTH",
            help="Leave-one-run-out at this pool depth: each run re-evaluated without the judged pairs only it "
            "contributed to the union of the runs' top DEPTH.",
        )
        parser.add_argument(
            "--coverage-threshold", default=None, help="Warn below this mean Judged@k (default: the setting)."
        )
        parser.add_argument("--permutations", type=int, default=DEFAULT_PERMUTATIONS, help="Draws when n > 16.")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--per-query", action="store_true", help="Add every run's per-query values (per_query).")
        parser.add_argument(
            "--format", choices=("text", "csv", "latex"), default="text", help="csv or latex: the table itself."
        )

    def run(self, **options):
        return leaderboard(
            collection_named(options["collection"]),
            [part.strip() for part in options["runs"].split(",") if part.strip()],
            qrels=options["qrels"],
            metrics=options["metrics"],
            leave_one_out=options["leave_one_out"],
            threshold=options["coverage_threshold"],
            permutations=options["permutations"],
            seed=options["seed"],
            per_query=options["per_query"],
        )

    def handle(self, *args, **options):
        self.export = None if options["json"] else EXPORTS.get(options["format"])
        super().handle(*args, **options)

    def format_text(self, board: dict) -> str:
        if self.export is not None:
            return self.export(board).rstrip("\n")
        lines = [f"{board['collection']} under {board['qrels_label']}: {board['queries']} judged queries"]
        for name in board["metrics"]:
            judged_at = board["judged_at"][name]
            lines.append(f"{name} (Judged@{judged_at} beside):")
            for place, run_id in enumerate(board["ranking"][name], 1):
                entry = board["runs"][run_id]
                stderr = entry["stderr"][name]
                lines.append(
                    f"  {place}. run {run_id} {entry['name']}: {entry['metrics'][name]:.4f}"
                    + (f" ± {stderr:.4f}" if stderr is not None else "")
                    + f"  Judged@{judged_at} {entry['judged'][judged_at]:.3f}"
                    + (
                        f"  leave-one-out {board['leave_one_out'][run_id]['metrics'][name]:.4f}"
                        f" ({board['leave_one_out'][run_id]['rank_change'][name]:+d} places)"
                        if "leave_one_out" in board
                        else ""
                    )
                )
            if "kendall_tau" in board and board["kendall_tau"][name] is not None:
                lines.append(f"  Kendall's tau, full vs leave-one-out: {board['kendall_tau'][name]:.3f}")
        warnings = {run_id: entry["coverage_warning"] for run_id, entry in board["runs"].items()}
        lines += [f"warning: run {run_id}: {warning}" for run_id, warning in warnings.items() if warning]
        lines += [
            f"{test['metric']}: run {test['a']} - run {test['b']} = {test['difference']:+.4f}"
            f"  permutation p={test['permutation_pvalue']:.4g}  Holm p={test['holm_pvalue']:.4g}"
            for test in board["tests"]
        ]
        return "\n".join(lines)
