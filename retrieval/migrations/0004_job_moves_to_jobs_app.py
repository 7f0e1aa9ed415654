# Job moved to the jobs app with its table unchanged (retrieval_job): the foreign keys point at the
# same table as before, so only Django's state changes; the database is left as it is.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0001_initial"),
        ("retrieval", "0003_run_metrics"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="job",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="runs",
                        to="jobs.job",
                    ),
                ),
                migrations.AlterField(
                    model_name="retriever",
                    name="training_job",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="jobs.job",
                    ),
                ),
                migrations.DeleteModel(
                    name="Job",
                ),
            ],
            database_operations=[],
        ),
    ]
