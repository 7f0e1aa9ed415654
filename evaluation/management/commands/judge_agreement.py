"""`judge_agreement COLLECTION --runs A,B,C --judge NAME [--human imported|study:ID] [--metrics
"nDCG@10 P@5"] [--seed 0] [--bootstrap 1000] [--json]`: does the judge rank the runs as the human
qrels do (evaluation.judge_agreement)? -> keys `metrics` (metric -> {human, judge (run id ->
value), kendall_tau, tau_ap, spearman, tau_ci, ...}), `labels` (Cohen's kappa per query and
overall), `queries`, `runs`."""

from evaluation.aggregates import LEADERBOARD_METRICS
from evaluation.judge_agreement import BOOTSTRAP_SAMPLES, judge_agreement
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand
from retrieval.measures import HELP


class Command(JsonCommand):
    help = "Compare the leaderboard of runs under human qrels with the one under a judge's labels (tau, tau_AP, rho)."

    def add_command_arguments(self, parser):
        parser.add_argument("collection", help="Collection name.")
        parser.add_argument("--runs", required=True, help="Comma-separated run ids (at least two).")
        parser.add_argument("--judge", required=True, help="The judge's name (its latest version's labels).")
        parser.add_argument("--human", default=None, help="imported (default) or study:ID[:majority|mean|median].")
        parser.add_argument("--metrics", default="", help=f"{HELP} (default: {' '.join(LEADERBOARD_METRICS)}).")
        parser.add_argument("--seed", default=None, help="Seed of the bootstrap over queries (default 0).")
        parser.add_argument(
            "--bootstrap", default=None, help=f"Bootstrap resamples (default {BOOTSTRAP_SAMPLES}; 0: none)."
        )

    def run(self, **options):
        return judge_agreement(
            collection_named(options["collection"]),
            [part.strip() for part in options["runs"].split(",") if part.strip()],
            judge=options["judge"],
            human=options["human"],
            metrics=options["metrics"],
            seed=options["seed"],
            bootstrap=options["bootstrap"],
        )

    def format_text(self, report: dict) -> str:
        lines = [
            f"{report['collection']}: {report['judge_label']} against {report['human_label']}, "
            f"{report['queries']} queries, {len(report['runs'])} runs"
        ]
        for name, section in report["metrics"].items():
            interval = section["tau_ci"]
            lines.append(
                f"{name}: Kendall's tau {_number(section['kendall_tau'])}"
                + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")
                + f", tau_AP {_number(section['tau_ap'])}, Spearman {_number(section['spearman'])}"
            )
            change = section["largest_rank_change"]
            lines.append(
                f"  largest rank change: run {change['run']} {change['name']} "
                f"{change['human_place']} -> {change['judge_place']}"
            )
        labels = report["labels"]
        lines.append(f"labels: {labels['pairs']} pairs both labelled, Cohen's kappa {_number(labels['kappa'])}")
        return "\n".join(lines)


def _number(value) -> str:
    return "-" if value is None else f"{value:.3f}"
