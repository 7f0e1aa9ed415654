"""Tasks that belong to no one app, and the worker's report of a task that died outside
`execute`. Every worker imports this module at start (Celery's autodiscovery), so the receiver
is connected in each process that can see a task die, and in no other."""

from celery import shared_task
from celery.signals import task_failure

from jobs import services
from jobs.models import Job


@shared_task(name="jobs.tasks.ping")
def ping() -> str:
    """Lets the dashboard and health checks see that a worker answers."""
    return "pong"


@shared_task(name="jobs.tasks.sweep_stale_jobs", ignore_result=True)
def sweep_stale_jobs() -> list[int]:
    """Celery beat runs this every MARGINALIA_SWEEP_SECONDS: jobs whose worker died without
    Celery noticing are failed (or retried), and their owners settle what they were writing."""
    return services.sweep_stale_jobs()


@task_failure.connect
def record_task_failure(sender=None, task_id=None, exception=None, **kwargs) -> None:
    """Fail (or retry) the job of a task that died outside `execute`: when a worker process is
    killed (out of memory, SIGKILL), Celery's main process reports WorkerLostError here, since
    with acks_late and reject_on_worker_lost off the task is not re-run by Celery itself."""
    for job_id in Job.objects.filter(celery_id=task_id, status__in=services.ACTIVE).values_list("pk", flat=True):
        services.mark_failed(job_id, services.failure_line(exception))
