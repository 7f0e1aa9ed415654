"""Stored reports are caches: each row keeps the fingerprint of the inputs it was computed
from, and is recomputed when the judgments, items or model runs behind it have changed."""

from django.db import models

from annotation.models import Study


class StudyReport(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="reports")
    model_runs_key = models.CharField(
        max_length=500, blank=True, help_text="Sorted ids of the model runs compared, comma-separated."
    )
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the inputs the payload came from.")
    payload = models.JSONField()
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "model_runs_key"], name="studyreport_unique_runs")]

    def __str__(self):
        runs = self.model_runs_key or "no models"
        return f"report on {self.study} ({runs})"
