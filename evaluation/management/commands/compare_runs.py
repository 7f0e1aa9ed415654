"""`compare_runs RUN_ID RUN_ID ... [--metrics "nDCG@10 R@5"] [--qrels SOURCE] [--json]`: the runs'
metrics with standard errors on the collection's judged queries, and paired t / permutation tests
with Holm's correction -> keys `runs` (run id -> {metrics, stderr}) and `tests` ({a, b, metric,
difference, t_pvalue, permutation_pvalue, holm_pvalue})."""

from evaluation.comparison import DEFAULT_PERMUTATIONS, compare_runs
from retrieval.management.base import JsonCommand
from retrieval.qrels_sources import source_help


class Command(JsonCommand):
    help = "Compare runs of one collection on the same queries, with paired significance tests."

    def add_command_arguments(self, parser):
        parser.add_argument("run_ids", nargs="+", metavar="RUN_ID")
        parser.add_argument("--metrics", default="", help='e.g. "nDCG@10 R@5 MAP" (default: the usual set).')
        parser.add_argument("--permutations", type=int, default=DEFAULT_PERMUTATIONS, help="Draws when n > 16.")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--per-query", action="store_true", help="Keep each run's per-query values.")
        parser.add_argument("--qrels", default=None, help=f"Whose labels: {source_help()} (default imported).")

    def run(self, **options):
        comparison = compare_runs(
            options["run_ids"],
            options["metrics"],
            permutations=options["permutations"],
            seed=options["seed"],
            qrels=options["qrels"],
        )
        if not options["per_query"]:
            comparison.pop("per_query")
            comparison.pop("query_ids")
        return comparison

    def format_text(self, comparison: dict) -> str:
        lines = [f"{comparison['queries']} judged queries under {comparison['qrels']}"]
        for run_id, block in comparison["runs"].items():
            cells = [
                f"{key} {value:.4f}" + (f"±{block['stderr'][key]:.4f}" if block["stderr"][key] is not None else "")
                for key, value in block["metrics"].items()
                if value is not None
            ]
            lines.append(f"run {run_id} ({block['name']}): " + "  ".join(cells))
        lines += [
            f"{test['metric']}: run {test['a']} - run {test['b']} = {test['difference']:+.4f}"
            f"  t p={test['t_pvalue']:.4g}  permutation p={test['permutation_pvalue']:.4g}"
            f"  Holm p={test['holm_pvalue']:.4g}"
            for test in comparison["tests"]
        ]
        return "\n".join(lines)
