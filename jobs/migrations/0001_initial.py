# The Job model moved here from the retrieval app. Its table (retrieval_job) already exists, created
# by retrieval's 0001, so this migration only teaches Django's state that jobs.Job owns it.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("retrieval", "0003_run_metrics"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Job",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("kind", models.CharField(max_length=50)),
                        ("queue", models.CharField(default="cpu", max_length=20)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("pending", "Pending"),
                                    ("running", "Running"),
                                    ("succeeded", "Succeeded"),
                                    ("failed", "Failed"),
                                    ("cancelled", "Cancelled"),
                                ],
                                default="pending",
                                max_length=20,
                            ),
                        ),
                        ("progress", models.FloatField(default=0.0)),
                        ("message", models.CharField(blank=True, max_length=500)),
                        ("error", models.TextField(blank=True)),
                        ("parameters", models.JSONField(blank=True, default=dict)),
                        ("result", models.JSONField(blank=True, default=dict)),
                        ("celery_id", models.CharField(blank=True, max_length=100)),
                        ("cancel_requested", models.BooleanField(default=False)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "heartbeat_at",
                            models.DateTimeField(
                                blank=True,
                                help_text="Last sign of life of a running job (each progress report).",
                                null=True,
                            ),
                        ),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "retrieval_job",
                        "ordering": ["-created_at"],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
