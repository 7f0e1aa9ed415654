"""What the jobs app announces to the apps above it (which it never imports).

- `job_ended(job_id, status)`: a job ended failed or cancelled, by whatever path (its own work
  raised, staff cancelled it, its worker was lost, the stale sweep, the broker refused it). An app
  whose rows a job was writing settles them here (a run drops its partial hits). Receivers must be
  idempotent: a job may be announced again by a later sweep.
- `job_requeued(job_id)`: staff retried a failed or cancelled job; its rows go back to pending.
"""

from django.dispatch import Signal

job_ended = Signal()
job_requeued = Signal()
