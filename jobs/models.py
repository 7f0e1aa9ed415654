"""Background work as rows: what a worker is doing, how far it got, and how it ended.

Every app's long operations (runs, imports, training, judging, reports) are `Job`s, so the
dashboard, the API and the stale sweep treat them alike. This app is the ground floor: any other
app may import it; it imports none of them.
"""

from django.conf import settings
from django.db import models


class Job(models.Model):
    """A unit of background work and its visible state: what the dashboard polls."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    kind = models.CharField(max_length=50)
    queue = models.CharField(max_length=20, default="cpu")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    progress = models.FloatField(default=0.0)
    message = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    celery_id = models.CharField(max_length=100, blank=True)
    cancel_requested = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of a running job (each progress report)."
    )
    queued_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its task was last sent to the broker: a job pending long after this may have lost its message.",
    )
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="children",
        help_text="The job this one is a part (shard) of; a parent's state follows its children.",
    )
    task = models.CharField(max_length=200, blank=True, help_text="The Celery task that runs it (to retry it).")
    arguments = models.JSONField(default=list, blank=True, help_text="The task's arguments after the job id.")
    attempts = models.PositiveIntegerField(default=0, help_text="How many times a worker started it.")
    worker = models.CharField(max_length=200, blank=True, help_text="host:pid of the process running it (last start).")
    max_attempts = models.PositiveIntegerField(
        default=1, help_text="Starts allowed before a failure is final (a lost or failed shard is retried alone)."
    )

    class Meta:
        # The table keeps the name it had when jobs lived in the retrieval app.
        db_table = "retrieval_job"
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.kind} #{self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in {self.Status.SUCCEEDED, self.Status.FAILED, self.Status.CANCELLED}
