"""judge_pool [--judge NAME] (--study ID | --collection C [--runs A,B --depth K]) [--samples N]
[--objective-file F] [--async] [--json]: a judge labels every pair of a pool (a relevance study's
items of every role, a collection's qrels pairs, or the union of runs' top K), so that its labels
form qrels (`--qrels judge:NAME`). Stored answers are reused. Keys `judge`, `version`, `backend`,
`pairs`, `samples`, `answered`, `failed`, `asked`, `reused` (with --async: `judge`, `version`,
`job_id`, `queue`)."""

from jobs.progress import terminal_progress
from judges.backends import EndpointUnavailable
from judges.pools import label_pool, pool_pairs, pool_spec
from judges.prompts import read_objective
from judges.services import get_judge, start_pool_labelling
from retrieval.errors import InputError
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Let a judge label every pair of a pool (a study's, a collection's qrels pairs, runs' top K) as qrels."

    def add_command_arguments(self, parser):
        parser.add_argument("--judge", default=None, help="Judge name (latest version); default: the embedded judge.")
        parser.add_argument("--study", type=int, default=None, help="A relevance study: the pairs of all its items.")
        parser.add_argument("--collection", default=None, help="A collection: its qrels pairs, or with --runs ...")
        parser.add_argument(
            "--runs", default="", help="... the union of these runs' top --depth (comma-separated ids)."
        )
        parser.add_argument("--depth", type=int, default=10, help="Pool depth for --runs (default 10).")
        parser.add_argument("--samples", type=int, default=1, help="Answers per pair (sample i uses seed + i).")
        parser.add_argument(
            "--objective-file", default=None, help="BIRCO's task objective, for pairs asked outside a study."
        )
        parser.add_argument("--async", dest="run_async", action="store_true", help="Send the work to a Celery worker.")

    def run(self, *, judge, study, collection, runs, depth, samples, objective_file, run_async, **options):
        chosen = get_judge(judge)
        spec = pool_spec(
            study=study,
            collection=collection_named(collection) if collection else None,
            runs=runs,
            depth=depth,
            objective=read_objective(objective_file),
        )
        if run_async:
            job = start_pool_labelling(chosen, spec, samples)
            return {"judge": chosen.name, "version": chosen.version, "job_id": job.pk, "queue": job.queue}
        try:
            return label_pool(chosen, pool_pairs(chosen, spec), samples, terminal_progress(f"judge {chosen}"))
        except EndpointUnavailable as exc:
            raise InputError(str(exc), field="judge") from None
