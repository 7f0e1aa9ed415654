"""Each judgment keeps its item's study and role (annotation.models.Judgment), so the staff pages
count and take medians from indexes that lead with the study instead of joining every judgment to
its item; existing judgments are filled here in one UPDATE."""

import django.db.models.deletion
import django.db.models.functions.comparison
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def copy_item_fields(apps, schema_editor):
    Item, Judgment = (apps.get_model("annotation", name) for name in ("Item", "Judgment"))
    item = Item.objects.filter(pk=OuterRef("item_id"))
    Judgment.objects.update(study_id=Subquery(item.values("study_id")[:1]), item_role=Subquery(item.values("role")[:1]))


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0013_staff_pages_item_live_counts"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgment",
            name="study",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="annotation.study",
            ),
        ),
        migrations.AddField(
            model_name="judgment",
            name="item_role",
            field=models.CharField(
                choices=[
                    ("work", "Formal work"),
                    ("gold", "Hidden gold check"),
                    ("qualification", "Qualification round"),
                ],
                default="work",
                editable=False,
                max_length=20,
            ),
            preserve_default=False,
        ),
        migrations.RunPython(copy_item_fields, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="judgment",
            name="study",
            field=models.ForeignKey(
                db_index=False,
                editable=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="annotation.study",
            ),
        ),
        migrations.AddIndex(
            model_name="judgment",
            index=models.Index(
                fields=["study", "annotator", "submitted_at", "voided", "seconds", "item_role", "unsure"],
                name="judgment_study_annotator",
            ),
        ),
        migrations.AddIndex(
            model_name="judgment",
            index=models.Index(
                condition=models.Q(("voided", False)),
                fields=["study", "annotator", "seconds"],
                name="judgment_live_seconds",
            ),
        ),
        migrations.AddIndex(
            model_name="judgment",
            index=models.Index(
                models.F("study"),
                models.F("item_role"),
                models.F("annotator"),
                django.db.models.functions.comparison.Coalesce("seconds", "server_seconds"),
                models.F("seconds"),
                models.F("server_seconds"),
                models.F("voided"),
                condition=models.Q(("voided", False)),
                name="judgment_counted_by_annotator",
            ),
        ),
        migrations.AddIndex(
            model_name="judgment",
            index=models.Index(
                models.F("study"),
                models.F("item_role"),
                django.db.models.functions.comparison.Coalesce("seconds", "server_seconds"),
                models.F("annotator"),
                condition=models.Q(("voided", False)),
                name="judgment_counted_seconds",
            ),
        ),
    ]
