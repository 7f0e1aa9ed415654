"""`extend_study STUDY_ID --runs 4,5 [--budget N] [--budget-per-query N] [--json]`: add runs to a
relevance study's pool. Their top-depth pairs not yet pooled become new pairs, those already
pooled record the new run's rank too, and judgments already made are kept and counted; the
pool's strategy then draws what fits the budget (`--budget` adds that many judged pairs,
`--budget-per-query` raises the per-query budget).

-> `study`, `extension`, `runs`, `pairs_added`, `pairs_already_pooled`, `items_added`, `items`,
`judged_items`, `budget`, `budget_per_query`."""

from annotation.services import get_study
from annotation.services.pools import extend_pool
from jobs.progress import terminal_progress
from retrieval.management.base import JsonCommand
from retrieval.selectors import get_run
from retrieval.wording import counted


class Command(JsonCommand):
    help = "Add runs to a relevance study's pool: only pairs not yet pooled are new; judgments stay."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument("--runs", required=True, help="Comma-separated ids of the runs to add.")
        parser.add_argument("--budget", type=int, help="Judge up to this many more pairs in all.")
        parser.add_argument("--budget-per-query", type=int, help="Raise the pool's budget per query by this much.")

    def run(self, **options):
        study = get_study(options["study_id"])
        runs = [get_run(name.strip(), field="--runs") for name in options["runs"].split(",") if name.strip()]
        extension = extend_pool(
            study,
            runs,
            budget=options["budget"],
            budget_per_query=options["budget_per_query"],
            progress=terminal_progress("extend_study"),
        )
        return extension.summary()

    def format_text(self, summary):
        return (
            f"study {summary['study']}: {counted(summary['pairs_added'], 'new pair')}, "
            f"{counted(summary['pairs_already_pooled'], 'pair')} already pooled, "
            f"{counted(summary['items_added'], 'item')} added ({summary['items']} in all, "
            f"{summary['judged_items']} judged)"
        )
