import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0005_annotator_skip_flag_undo_context"),
        ("evaluation", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="AgreementWatch",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "study_threshold",
                    models.FloatField(
                        blank=True,
                        help_text="Warn when the study's Krippendorff's alpha falls below this; empty: never.",
                        null=True,
                    ),
                ),
                (
                    "annotator_threshold",
                    models.FloatField(
                        blank=True,
                        help_text="Warn when an annotator's Cohen's kappa with the others falls below this; empty: never.",
                        null=True,
                    ),
                ),
                (
                    "batch_size",
                    models.PositiveIntegerField(
                        default=100,
                        help_text="Judgments per batch: agreement over time, and how often the worker checks.",
                    ),
                ),
                ("checked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "checked_judgments",
                    models.PositiveIntegerField(default=0, help_text="Counted judgments at the last check."),
                ),
                (
                    "study_value",
                    models.FloatField(blank=True, help_text="The study's alpha at the last check.", null=True),
                ),
                ("study_low", models.BooleanField(default=False)),
                (
                    "low_annotators",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text="Annotators below the threshold at the last check: name -> kappa.",
                    ),
                ),
                (
                    "study",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="agreement_watch",
                        to="annotation.study",
                    ),
                ),
            ],
        ),
    ]
