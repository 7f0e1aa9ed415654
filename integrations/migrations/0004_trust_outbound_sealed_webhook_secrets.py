"""Webhook secrets stop being stored in clear: each existing secret is sealed (outbound.sealing,
under the first key of MARGINALIA_SECRETS_KEY) into `sealed_secret` with its hint, then the clear
column is dropped. Receivers keep verifying with the secret they already have. Reversible: going
back unseals them into the clear column again."""

from django.db import migrations, models

import outbound.fields
from outbound.sealing import hint, seal, unseal


def seal_secrets(apps, schema_editor):
    Webhook = apps.get_model("integrations", "Webhook")
    for hook in Webhook.objects.all().only("pk", "secret"):
        Webhook.objects.filter(pk=hook.pk).update(sealed_secret=seal(hook.secret), secret_hint=hint(hook.secret))


def unseal_secrets(apps, schema_editor):
    Webhook = apps.get_model("integrations", "Webhook")
    for hook in Webhook.objects.all().only("pk", "sealed_secret"):
        Webhook.objects.filter(pk=hook.pk).update(secret=unseal(hook.sealed_secret))


class Migration(migrations.Migration):
    dependencies = [
        ("integrations", "0003_recruiting_crowd_identities"),
    ]

    operations = [
        migrations.AddField(
            model_name="webhook",
            name="sealed_secret",
            field=outbound.fields.SealedField(
                default="", help_text="The HMAC-SHA256 key, sealed; the receiver verifies with it."
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="webhook",
            name="secret_hint",
            field=models.CharField(blank=True, max_length=8),
        ),
        migrations.RunPython(seal_secrets, unseal_secrets),
        # A default for the clear column before it goes, so that going back can add it again to a
        # table with rows (the backward step then fills it in).
        migrations.AlterField(
            model_name="webhook",
            name="secret",
            field=models.CharField(default="", max_length=128),
        ),
        migrations.RemoveField(
            model_name="webhook",
            name="secret",
        ),
        migrations.AlterField(
            model_name="webhook",
            name="url",
            field=models.URLField(help_text="Normalised by outbound.targets.parse_url.", max_length=500),
        ),
    ]
