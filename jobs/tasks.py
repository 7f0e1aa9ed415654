"""Tasks that belong to no one app."""

from celery import shared_task


@shared_task(name="jobs.tasks.ping")
def ping() -> str:
    """Lets the dashboard and health checks see that a worker answers."""
    return "pong"
