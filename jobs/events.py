"""Job lifecycle events for apps above jobs (integrations' webhooks), sent without jobs knowing
who listens.

- `job_finished(job)`: the job ended: succeeded, failed or cancelled (read `job.status`). Sent
  once, by whichever path ended it (execute, a failed task, the stale-job sweep).
"""

from django.dispatch import Signal

job_finished = Signal()
