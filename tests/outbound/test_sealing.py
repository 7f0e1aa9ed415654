"""Sealed secrets: what is stored opens only with the configured keys, a key is rotated by
putting the new one first and running `reseal_secrets`, and a value no key opens is refused in
one line. The rotation runs over real rows: a judge secret and a webhook's signing secret."""

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError

from integrations.models import Webhook
from judges.models import JudgeSecret
from judges.secrets import store_secret
from outbound.sealing import SealBroken, derived_key, hint, seal, unseal
from tests.factories import call_json_command, make_webhook

pytestmark = pytest.mark.django_db

VALUE = "sk-a-key-that-must-never-be-shown-again"


def test_a_sealed_value_opens_to_itself_and_shows_nothing_of_it():
    first, second = seal(VALUE), seal(VALUE)
    assert unseal(first) == unseal(second) == VALUE
    assert first != second and VALUE not in first
    assert hint(VALUE) == "…gain" and hint("short") == ""


def test_the_default_key_is_derived_from_djangos_secret_key_and_another_secret_key_cannot_open_it(settings):
    settings.MARGINALIA_SECRETS_KEY = ["DJANGO_SECRET_KEY"]
    token = seal(VALUE)
    assert Fernet(derived_key(settings.SECRET_KEY)).decrypt(token.encode()).decode() == VALUE
    settings.SECRET_KEY = "another-secret-key-for-this-test-only-0123456789"
    with pytest.raises(SealBroken, match="cannot be opened with MARGINALIA_SECRETS_KEY") as broken:
        unseal(token)
    assert "\n" not in str(broken.value) and VALUE not in str(broken.value)


def test_a_key_is_rotated_by_putting_the_new_one_first_resealing_and_dropping_the_old(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.MARGINALIA_SECRETS_KEY = [old]
    store_secret("openai", VALUE)
    hook = make_webhook("https://example.org/hook", "webhook-signing-secret-0001")
    before = {"judge": JudgeSecret.objects.get().sealed_value, "hook": Webhook.objects.get().sealed_secret}

    settings.MARGINALIA_SECRETS_KEY = [new, old]
    assert unseal(before["judge"]) == VALUE  # the old key still opens what it sealed
    assert call_json_command("reseal_secrets") == {"resealed": 2}
    settings.MARGINALIA_SECRETS_KEY = [new]

    hook.refresh_from_db()
    assert unseal(JudgeSecret.objects.get().sealed_value) == VALUE
    assert unseal(hook.sealed_secret) == "webhook-signing-secret-0001"
    assert Fernet(new.encode()).decrypt(hook.sealed_secret.encode()) == b"webhook-signing-secret-0001"
    with pytest.raises(SealBroken):
        unseal(before["judge"])  # a copy sealed under the dropped key stays closed


def test_resealing_names_what_no_key_opens_in_one_line_and_reseals_the_rest(settings):
    settings.MARGINALIA_SECRETS_KEY = [Fernet.generate_key().decode()]
    lost = make_webhook("https://example.org/hook", "sealed-under-a-key-now-lost")
    settings.MARGINALIA_SECRETS_KEY = [Fernet.generate_key().decode()]
    store_secret("openai", VALUE)

    with pytest.raises(CommandError) as refused:
        call_json_command("reseal_secrets")

    assert str(refused.value) == (
        f"1 resealed; 1 cannot be opened with MARGINALIA_SECRETS_KEY: integrations.Webhook {lost.pk}"
    )
    assert unseal(JudgeSecret.objects.get().sealed_value) == VALUE


@pytest.mark.parametrize("keys", [["not-a-fernet-key"], []])
def test_a_key_that_is_no_fernet_key_stops_at_the_first_use(settings, keys):
    settings.MARGINALIA_SECRETS_KEY = keys
    with pytest.raises(ImproperlyConfigured, match="MARGINALIA_SECRETS_KEY"):
        seal(VALUE)
