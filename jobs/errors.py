"""What the jobs layer raises to its callers. Kept apart from jobs.services, which loads the
Celery app: a command that only catches these (every data command does, through JsonCommand)
starts without Celery."""


class JobCancelled(Exception):
    """Raised inside a running job when staff asked to cancel it."""


class BrokerUnavailable(Exception):
    """The task queue (Redis) cannot be reached, so nothing can be queued: callers refuse the
    request at once (HTTP 503, a command error) instead of leaving a job that never starts."""
