"""Tasks that belong to no one app."""

from celery import shared_task

from jobs import services


@shared_task(name="jobs.tasks.ping")
def ping() -> str:
    """Lets the dashboard and health checks see that a worker answers."""
    return "pong"


@shared_task(name="jobs.tasks.sweep_stale_jobs", ignore_result=True)
def sweep_stale_jobs() -> list[int]:
    """Celery beat runs this every MARGINALIA_SWEEP_SECONDS: jobs whose worker died without
    Celery noticing are failed (or retried), and their owners settle what they were writing."""
    return services.sweep_stale_jobs()
