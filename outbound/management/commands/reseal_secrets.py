"""`reseal_secrets [--json]`: seal every sealed secret again under the first key of
MARGINALIA_SECRETS_KEY, the middle step of a key rotation (put the new key first, reseal, then
drop the old key). Key `resealed`. Values none of the keys opens are left as they are and named
(model and id) in one line with a non-zero exit; the others are resealed all the same."""

import json

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from marginalia.command_checks import DATA_COMMAND_CHECKS
from outbound.fields import SealedField
from outbound.sealing import SealBroken, reseal


def sealed_columns():
    """(model, field name) of every SealedField of every installed app."""
    for model in apps.get_models():
        for field in model._meta.get_fields():
            if isinstance(field, SealedField):
                yield model, field.name


class Command(BaseCommand):
    help = "Seal every stored secret again under the first key of MARGINALIA_SECRETS_KEY (key rotation)."
    requires_system_checks = DATA_COMMAND_CHECKS

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print the summary as one JSON line.")

    def handle(self, *args, **options):
        resealed, unreadable = 0, []
        with transaction.atomic():
            for model, name in sealed_columns():
                for pk, token in model.objects.exclude(**{name: ""}).values_list("pk", name).iterator():
                    try:
                        model.objects.filter(pk=pk).update(**{name: reseal(token)})
                    except SealBroken:
                        unreadable.append(f"{model._meta.label} {pk}")
                        continue
                    resealed += 1
        if unreadable:
            raise CommandError(
                f"{resealed} resealed; {len(unreadable)} cannot be opened with MARGINALIA_SECRETS_KEY: "
                + ", ".join(unreadable)
            )
        self.stdout.write(json.dumps({"resealed": resealed}) if options["json"] else f"resealed: {resealed}")
