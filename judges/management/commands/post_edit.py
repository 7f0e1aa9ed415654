"""post_edit STUDY_ID [--judge NAME] [--share 1.0] [--seed 0] [--async] [--json]: make the study a
post-editing study: annotators see the judge's answer pre-selected as "a suggested label" on a
seeded share of its formal items (judges.post_editing), and every judgment records whether it was
shown one and kept it. Refused once anyone has answered. Keys `study`, `judge`, `version`,
`share`, `seed`, `selected`, `proposals`, `unreadable` (with --async: `judge`, `version`,
`job_id`, `queue`)."""

from annotation.services import get_study
from jobs.progress import terminal_progress
from judges.backends import EndpointUnavailable
from judges.post_editing import enable_post_editing
from judges.services import get_judge, start_post_editing
from retrieval.errors import InputError
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Show annotators a judge's proposed answers pre-selected (post-editing) on a share of a study's items."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int, metavar="STUDY_ID")
        parser.add_argument("--judge", default=None, help="Judge name (latest version); default: the embedded judge.")
        parser.add_argument("--share", type=float, default=1.0, help="Share of the formal items shown a proposal.")
        parser.add_argument("--seed", type=int, default=0, help="Seed of the draw of items.")
        parser.add_argument("--async", dest="run_async", action="store_true", help="Send the work to a Celery worker.")

    def run(self, *, study_id, judge, share, seed, run_async, **options):
        study = get_study(study_id, field="study")
        chosen = get_judge(judge)
        if run_async:
            job = start_post_editing(study, chosen, share, seed)
            return {"judge": chosen.name, "version": chosen.version, "job_id": job.pk, "queue": job.queue}
        try:
            return enable_post_editing(study, chosen, share, seed, terminal_progress(f"proposals of {chosen}"))
        except EndpointUnavailable as exc:
            raise InputError(str(exc), field="judge") from None
