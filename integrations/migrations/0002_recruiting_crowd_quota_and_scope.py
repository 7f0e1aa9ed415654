"""Recruiting that composes:

- a crowd link's quota becomes its own setting (CrowdLink.quota), copied from the study's
  per-annotator cap it used to share (the cap stays as it was: nothing changes for anyone until
  staff change one of them), and carried by each participant's StudyGrant, which the queue reads;
- accounts made by an invitation are scoped to their granted studies: the invited studies, plus
  those that name them and those they already worked on, so nobody is locked out mid-study.
"""

from django.conf import settings
from django.db import migrations, models
from django.db.models import Q


def forwards(apps, schema_editor):
    CrowdLink = apps.get_model("integrations", "CrowdLink")
    Invitation = apps.get_model("integrations", "Invitation")
    Study = apps.get_model("annotation", "Study")
    StudyGrant = apps.get_model("annotation", "StudyGrant")
    AnnotatorProfile = apps.get_model("annotation", "AnnotatorProfile")

    for link in CrowdLink.objects.select_related("study"):
        link.quota = link.study.max_items_per_annotator
        link.save(update_fields=["quota"])
        StudyGrant.objects.filter(study_id=link.study_id, annotator__participant__link=link).update(
            item_quota=link.quota
        )

    for invitation in Invitation.objects.filter(accepted_by__isnull=False):
        user_id = invitation.accepted_by_id
        worked_on = Study.objects.filter(
            Q(pk__in=invitation.studies.values("pk"))
            | Q(annotators__pk=user_id)
            | Q(items__judgments__annotator_id=user_id)
            | Q(items__assignments__annotator_id=user_id)
        ).distinct()
        StudyGrant.objects.bulk_create(
            [StudyGrant(study_id=pk, annotator_id=user_id) for pk in worked_on.values_list("pk", flat=True)],
            ignore_conflicts=True,
        )
        AnnotatorProfile.objects.update_or_create(user_id=user_id, defaults={"only_granted": True})


def backwards(apps, schema_editor):
    """The quota back onto the study's cap, invited accounts unscoped."""
    CrowdLink = apps.get_model("integrations", "CrowdLink")
    Invitation = apps.get_model("integrations", "Invitation")
    Study = apps.get_model("annotation", "Study")
    AnnotatorProfile = apps.get_model("annotation", "AnnotatorProfile")
    invited = Invitation.objects.filter(accepted_by__isnull=False).values("accepted_by")
    AnnotatorProfile.objects.filter(user__in=invited).update(only_granted=False)
    for link in CrowdLink.objects.exclude(quota=None):
        Study.objects.filter(pk=link.study_id).update(max_items_per_annotator=link.quota)


class Migration(migrations.Migration):
    dependencies = [
        ("integrations", "0001_recruiting_and_webhooks"),
        ("annotation", "0006_recruiting_study_grants"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="crowdlink",
            name="quota",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Most formal items one participant judges (the study's per-annotator cap is separate); empty: none.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="invitation",
            name="only_invited_studies",
            field=models.BooleanField(
                default=True,
                help_text="The account works on the invited studies only (off: on every open study too).",
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
