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


class AgreementWatch(models.Model):
    """A study's agreement thresholds, set by staff, and what the last check found.

    The study's agreement (Krippendorff's alpha, evaluation.agreement_detail) below
    `study_threshold` announces `study.agreement_low`; an annotator's Cohen's kappa with the
    others below `annotator_threshold` announces `annotator.agreement_low`. Each is announced
    when it falls below, not again while it stays there, and again after it recovered and fell.
    Checked when a report is computed and by a worker once `batch_size` new counted judgments
    arrived (evaluation.alerts), never in an annotator's request."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="agreement_watch")
    study_threshold = models.FloatField(
        null=True, blank=True, help_text="Warn when the study's Krippendorff's alpha falls below this; empty: never."
    )
    annotator_threshold = models.FloatField(
        null=True,
        blank=True,
        help_text="Warn when an annotator's Cohen's kappa with the others falls below this; empty: never.",
    )
    batch_size = models.PositiveIntegerField(
        default=100, help_text="Judgments per batch: agreement over time, and how often the worker checks."
    )
    checked_at = models.DateTimeField(null=True, blank=True)
    checked_judgments = models.PositiveIntegerField(default=0, help_text="Counted judgments at the last check.")
    study_value = models.FloatField(null=True, blank=True, help_text="The study's alpha at the last check.")
    study_low = models.BooleanField(default=False)
    low_annotators = models.JSONField(
        default=dict, blank=True, help_text="Annotators below the threshold at the last check: name -> kappa."
    )

    def __str__(self):
        return f"agreement watch of {self.study}"
