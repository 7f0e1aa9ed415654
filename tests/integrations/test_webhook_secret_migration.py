"""Migration 0004 seals the webhook secrets stored in clear before it: each hook keeps its secret
(a receiver verifies what it verified before) and the clear column is gone; going back restores
it. Run on the real migration graph, from 0003 forwards."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from outbound.sealing import unseal

BEFORE = [("integrations", "0003_recruiting_crowd_identities")]
AFTER = [("integrations", "0004_trust_outbound_sealed_webhook_secrets")]
CLEAR_SECRET = "a-secret-stored-in-clear-by-0001"


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_existing_webhook_secrets_are_sealed_and_keep_their_value_both_ways():
    old = migrate(BEFORE)
    old_webhook = old.get_model("integrations", "Webhook")
    hook = old_webhook.objects.create(url="http://127.0.0.1:9/hook", secret=CLEAR_SECRET, events=[])

    new = migrate(AFTER)
    sealed = new.get_model("integrations", "Webhook").objects.get(pk=hook.pk)
    columns = {
        column.name
        for column in connection.introspection.get_table_description(connection.cursor(), "integrations_webhook")
    }
    back = migrate(BEFORE).get_model("integrations", "Webhook").objects.get(pk=hook.pk)
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    assert unseal(sealed.sealed_secret) == CLEAR_SECRET and CLEAR_SECRET not in sealed.sealed_secret
    assert sealed.secret_hint == f"…{CLEAR_SECRET[-4:]}" and "secret" not in columns
    assert back.secret == CLEAR_SECRET
