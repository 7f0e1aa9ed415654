"""`retry_job JOB_ID`: queue a failed or cancelled job again (a run: all its shards)."""

import json

from django.core.management.base import BaseCommand, CommandError

from jobs.errors import BrokerUnavailable
from jobs.models import Job
from jobs.services import retry_job
from marginalia.command_checks import DATA_COMMAND_CHECKS
from marginalia.converters import database_id


class Command(BaseCommand):
    requires_system_checks = DATA_COMMAND_CHECKS

    help = "Queue a failed or cancelled job again; a run's job re-runs its shards from a clean run."

    def add_arguments(self, parser):
        parser.add_argument("job_id", type=database_id)
        parser.add_argument("--json", action="store_true", help="Print the job as one JSON line.")

    def handle(self, *args, job_id, **options):
        job = Job.objects.filter(pk=job_id).first()
        if job is None:
            raise CommandError(f"job_id: no job with id {job_id}")
        try:
            job = retry_job(job)
        except (ValueError, BrokerUnavailable) as exc:
            raise CommandError(str(exc)) from exc
        summary = {"job_id": job.pk, "status": job.status, "shards": job.children.count()}
        self.stdout.write(json.dumps(summary) if options["json"] else f"job {job.pk} queued again")
