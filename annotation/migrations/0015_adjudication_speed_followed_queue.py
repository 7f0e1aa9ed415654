"""The adjudication queue follows each change of a study's judgments instead of being built afresh
(annotation.services.adjudication): every judgment writer marks its items (AdjudicationChange),
the agreed items the sample is drawn from are stored with their draw keys (AgreedItem), and an
entry's rank becomes its own sort key (agreement, then position), so it never shifts when other
entries come or go. Queues built before this have no agreed items and dense ranks: they are
dropped here (and when it is undone), and each is built afresh when its page is next opened."""

import django.db.models.deletion
from django.db import migrations, models


def drop_built_queues(apps, schema_editor):
    for name in ("AdjudicationQueueEntry", "AdjudicationQueue"):
        apps.get_model("annotation", name).objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0014_staff_speed_judgment_study_role"),
    ]

    operations = [
        migrations.AlterField(
            model_name="adjudicationqueue",
            name="built_at",
            field=models.DateTimeField(auto_now=True, help_text="When the queue was last built afresh."),
        ),
        migrations.AlterField(
            model_name="adjudicationqueue",
            name="last_judgment",
            field=models.BigIntegerField(
                default=0, help_text="The largest judgment id when the entries last followed the study's judgments."
            ),
        ),
        migrations.AlterField(
            model_name="adjudicationqueue",
            name="stale",
            field=models.BooleanField(
                default=False, help_text="A judgment was voided since the entries last followed."
            ),
        ),
        migrations.AlterField(
            model_name="adjudicationqueueentry",
            name="rank",
            field=models.PositiveBigIntegerField(help_text="Sort key: agreement, then study position."),
        ),
        migrations.CreateModel(
            name="AdjudicationChange",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "item",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="annotation.item",
                    ),
                ),
                (
                    "study",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="annotation.study"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="AgreedItem",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("judgments", models.PositiveSmallIntegerField()),
                (
                    "sample_key",
                    models.BinaryField(
                        help_text="SHA-256 of 'seed:adjudication-sample:item id': the smallest are drawn first.",
                        max_length=32,
                    ),
                ),
                (
                    "item",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="annotation.item"
                    ),
                ),
                (
                    "study",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="annotation.study",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["study", "sample_key"], name="agreed_item_draw")],
            },
        ),
        migrations.AddIndex(
            model_name="adjudicationqueueentry",
            index=models.Index(fields=["study", "agreement"], name="adjudication_entry_agreement"),
        ),
        migrations.AddIndex(
            model_name="adjudicationqueueentry",
            index=models.Index(
                condition=models.Q(("sampled", True)), fields=["study"], name="adjudication_entry_sampled"
            ),
        ),
        # Last: on Postgres, rows deleted before an ALTER TABLE of theirs in one transaction refuse it.
        # Undone first, the same: ranks of this form do not fit the integer column it gives back.
        migrations.RunPython(drop_built_queues, drop_built_queues),
    ]
