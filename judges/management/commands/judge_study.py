"""judge_study STUDY_ID [--judge NAME] [--samples N] [--async] [--json]: ask a judge every work
item of a study (the embedded local judge when --judge is left out); stored answers are reused."""

from annotation.services import get_study
from jobs.progress import terminal_progress
from judges.asking import judge_study
from judges.backends import EndpointUnavailable
from judges.services import get_judge, start_judging
from retrieval.errors import InputError
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Ask a judge (model or LLM) the items of a study; prints judge, answered, failed."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int, metavar="STUDY_ID")
        parser.add_argument(
            "--judge", default=None, help="Judge name (latest version); default: the embedded local judge."
        )
        parser.add_argument("--samples", type=int, default=1, help="Answers per item (sample i uses seed + i).")
        parser.add_argument("--async", dest="run_async", action="store_true", help="Send the work to a Celery worker.")

    def run(self, *, study_id, judge, samples, run_async, **options):
        study = get_study(study_id, field="study")
        chosen = get_judge(judge)
        if run_async:
            job = start_judging(study, chosen, samples)
            return {"judge": chosen.name, "version": chosen.version, "job_id": job.pk, "queue": job.queue}
        try:
            return judge_study(study, chosen, samples, terminal_progress(f"judge {chosen}"))
        except EndpointUnavailable as exc:
            raise InputError(str(exc), field="judge") from None
