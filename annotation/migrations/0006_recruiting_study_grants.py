"""Accounts scoped to the studies given to them: AnnotatorProfile.only_study (one study, crowd
participants only) becomes `only_granted` plus one StudyGrant per study, which invitations use
too. Each account bound to a study keeps exactly that study."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def bound_study_to_grant(apps, schema_editor):
    AnnotatorProfile = apps.get_model("annotation", "AnnotatorProfile")
    StudyGrant = apps.get_model("annotation", "StudyGrant")
    bound = AnnotatorProfile.objects.filter(only_study__isnull=False)
    StudyGrant.objects.bulk_create(
        [StudyGrant(study_id=profile.only_study_id, annotator_id=profile.user_id) for profile in bound],
        ignore_conflicts=True,
    )
    bound.update(only_granted=True)


def grant_to_bound_study(apps, schema_editor):
    AnnotatorProfile = apps.get_model("annotation", "AnnotatorProfile")
    StudyGrant = apps.get_model("annotation", "StudyGrant")
    for profile in AnnotatorProfile.objects.filter(only_granted=True):
        grant = StudyGrant.objects.filter(annotator_id=profile.user_id).order_by("pk").first()
        profile.only_study_id = grant.study_id if grant else None
        profile.save(update_fields=["only_study"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0005_annotator_skip_flag_undo_context"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="annotatorprofile",
            name="only_granted",
            field=models.BooleanField(
                default=False,
                help_text="Works only on the studies granted to it (invited accounts, crowd participants).",
            ),
        ),
        migrations.AlterField(
            model_name="study",
            name="max_items_per_annotator",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Most formal items one annotator may judge; empty: no cap. (A crowd link's quota is its own.)",
                null=True,
            ),
        ),
        migrations.CreateModel(
            name="StudyGrant",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "item_quota",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Most formal items this account may judge here, besides the study's cap; empty: none of its own.",
                        null=True,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "annotator",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="study_grants",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "study",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="grants", to="annotation.study"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("study", "annotator"), name="study_grant_unique_per_account")
                ],
            },
        ),
        migrations.RunPython(bound_study_to_grant, grant_to_bound_study),
        migrations.RemoveField(model_name="annotatorprofile", name="only_study"),
    ]
