"""Every install has the embedded judge (issue 21.2): the judge panel preselects it, and before
this a fresh install refused it ("no judge named 'smollm2-135m-local'") until someone ran
judge_study on the command line. The settings are written out, not imported, so that this
migration creates the same row whatever later code says (judges.services.embedded_judge
registers the same settings)."""

from django.db import migrations

EMBEDDED_JUDGE = "smollm2-135m-local"
EMBEDDED_SETTINGS = {
    "temperature": 0.0,
    "seed": 0,
    "max_tokens": 6,
    "batch_size": 4,
    "concurrency": 4,
    "model": "",
    "gguf_file": "",
}


def create_embedded_judge(apps, schema_editor):
    Judge = apps.get_model("judges", "Judge")
    if not Judge.objects.filter(name=EMBEDDED_JUDGE).exists():
        Judge.objects.create(name=EMBEDDED_JUDGE, version=1, backend="local", settings=EMBEDDED_SETTINGS)


class Migration(migrations.Migration):
    dependencies = [("judges", "0002_trust_outbound_endpoint_secrets")]

    operations = [migrations.RunPython(create_embedded_judge, migrations.RunPython.noop)]
