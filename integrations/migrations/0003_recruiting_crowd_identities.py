"""Crowd identities that cannot be borrowed: each participant is bound to the session id of
their first visit by its SHA-256 (`session_digest`; one who came without a session id keeps an
empty binding, which nobody can resume), new arrivals are counted per client address
(`address_digest`, a keyed hash), and participants are named "Participant-N" instead of by
their platform id."""

import hashlib

from django.conf import settings
from django.db import migrations, models


def forwards(apps, schema_editor):
    Participant = apps.get_model("integrations", "Participant")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    for participant in Participant.objects.all():
        if participant.session:
            participant.session_digest = hashlib.sha256(participant.session.encode()).hexdigest()
            participant.save(update_fields=["session_digest"])
        name = f"Participant-{participant.pk}"
        if User.objects.filter(username__iexact=name).exclude(pk=participant.user_id).exists():
            name = f"{name}-{participant.user_id}"
        User.objects.filter(pk=participant.user_id).update(username=name)


def backwards(apps, schema_editor):
    """The old names; the session ids cannot come back from their digests."""
    Participant = apps.get_model("integrations", "Participant")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    for participant in Participant.objects.all():
        User.objects.filter(pk=participant.user_id).update(
            username=f"crowd-{participant.link_id}-{participant.external_id}"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("integrations", "0002_recruiting_crowd_quota_and_scope"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="participant",
            name="address_digest",
            field=models.CharField(
                blank=True,
                help_text="Keyed hash of the client address it came from (entry throttling).",
                max_length=64,
            ),
        ),
        migrations.AddField(
            model_name="participant",
            name="session_digest",
            field=models.CharField(
                blank=True, help_text="SHA-256 of the first visit's SESSION_ID or assignmentId.", max_length=64
            ),
        ),
        migrations.RunPython(forwards, backwards),
        migrations.RemoveField(model_name="participant", name="session"),
        migrations.AddIndex(
            model_name="participant",
            index=models.Index(fields=["address_digest", "created_at"], name="participant_address_recent"),
        ),
    ]
