"""Identities: sign-in is throttled on /accounts/login/, /admin/login/ and the token endpoint
(django-axes, marginalia/lockout.py): an account-and-address pair is locked after the failure
limit; past it, failures of an account from everywhere or of an address on every account impose
a doubling wait, which the account's owner does not meet at an address they signed in from; a
"too many attempts" page (429). Sessions and API tokens expire after the configured time, and a
password change revokes the account's tokens."""

import re
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F
from django.utils import timezone
from rest_framework.authtoken.models import Token

from tests.factories import api_client, make_annotator, make_user

pytestmark = pytest.mark.django_db

User = get_user_model()

LOGIN_PAGES = ["/accounts/login/", "/admin/login/"]
PASSWORD = "pw-for-tests"


def sign_in(client, page, username, password, address="10.0.0.1"):
    return client.post(page, {"username": username, "password": password}, REMOTE_ADDR=address)


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.parametrize("page", LOGIN_PAGES)
def test_thirty_wrong_passwords_lock_the_account_even_against_the_right_one(client, page):
    make_user("admin", staff=True)

    answers = [sign_in(client, page, "admin", f"guess-{n}").status_code for n in range(30)]

    limit = settings.AXES_FAILURE_LIMIT
    assert answers[: limit - 1] == [200] * (limit - 1)  # the form again, with its error
    assert answers[limit:] == [429] * (30 - limit)
    refused = sign_in(client, page, "admin", PASSWORD)
    assert refused.status_code == 429 and not signed_in(client)
    assert b"Too many attempts" in refused.content and b"marginalia.css" in refused.content
    assert b"Traceback" not in refused.content


def test_guesses_from_other_addresses_never_lock_the_owner_out_of_an_address_they_use(client):
    """Five wrong passwords from anywhere used to lock the account everywhere."""
    make_user("admin", staff=True)
    assert sign_in(client, "/accounts/login/", "admin", PASSWORD, address="10.7.7.7").status_code == 302
    client.logout()
    for n in range(30):
        sign_in(client, "/accounts/login/", "admin", f"guess-{n}", address=f"10.0.1.{n % 6}")

    assert sign_in(client, "/admin/login/", "admin", PASSWORD, address="10.7.7.7").status_code == 302
    assert signed_in(client)


def test_guesses_spread_over_many_addresses_wait_longer_and_longer(client, settings):
    settings.MARGINALIA_LOGIN_DELAY_SECONDS = 60
    make_user("admin", staff=True)
    limit = settings.AXES_FAILURE_LIMIT
    for n in range(limit):  # each from its own address: no pair reaches the limit
        assert sign_in(client, "/accounts/login/", "admin", f"guess-{n}", address=f"10.0.1.{n}").status_code == 200

    waiting = sign_in(client, "/accounts/login/", "admin", PASSWORD, address="10.9.9.9")
    assert waiting.status_code == 429 and not signed_in(client)
    assert re.search(rb"Try again in (59|60) seconds", waiting.content)

    passed_wait(minutes=1.5)  # the wait is over: one more guess, and the next wait doubles
    assert sign_in(client, "/accounts/login/", "admin", "guess-late", address="10.0.1.99").status_code == 200
    again = sign_in(client, "/accounts/login/", "admin", PASSWORD, address="10.9.9.9")
    assert again.status_code == 429 and re.search(rb"Try again in (119|120) seconds", again.content)
    for n in range(5):  # hammering during the wait is refused and not counted
        assert sign_in(client, "/accounts/login/", "admin", f"more-{n}", address=f"10.0.2.{n}").status_code == 429

    passed_wait(minutes=2.5)
    assert sign_in(client, "/accounts/login/", "admin", PASSWORD, address="10.9.9.9").status_code == 302


def passed_wait(minutes: float) -> None:
    """As if `minutes` had passed since every recorded failure."""
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=minutes))


def test_one_address_trying_many_accounts_waits_there_and_nowhere_else(client, settings):
    settings.MARGINALIA_LOGIN_DELAY_SECONDS = 60
    make_annotator("ann", password=PASSWORD)
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, "/accounts/login/", f"someone-{n}", "guess", address="10.0.2.1")

    assert sign_in(client, "/accounts/login/", "ann", PASSWORD, address="10.0.2.1").status_code == 429
    assert sign_in(client, "/accounts/login/", "ann", PASSWORD, address="10.0.2.2").status_code == 302
    assert signed_in(client)


def test_the_lock_lifts_after_the_cool_off(client, settings):
    make_user("admin", staff=True)
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, "/accounts/login/", "admin", f"guess-{n}")
    assert sign_in(client, "/accounts/login/", "admin", PASSWORD).status_code == 429

    settings.AXES_COOLOFF_TIME = timedelta(seconds=0)

    assert sign_in(client, "/accounts/login/", "admin", PASSWORD).status_code == 302


def test_a_few_mistakes_then_the_right_password_sign_in_and_reset_the_count(client):
    make_user("admin", staff=True)
    for round_ in range(3):
        for n in range(settings.AXES_FAILURE_LIMIT - 1):
            assert sign_in(client, "/accounts/login/", "admin", f"guess-{round_}-{n}").status_code == 200
        assert sign_in(client, "/accounts/login/", "admin", PASSWORD).status_code == 302
        client.logout()


def test_sessions_expire_after_the_configured_hours(client):
    make_user("admin", staff=True)
    sign_in(client, "/accounts/login/", "admin", PASSWORD)

    assert client.session.get_expiry_age() == settings.SESSION_COOKIE_AGE == 12 * 3600


def test_api_tokens_expire_after_the_configured_days():
    annotator = make_annotator("ann")
    study_url = "/api/annotate/999999/next/"
    client = api_client()
    token = Token.objects.create(user=annotator)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert client.get(study_url).status_code == 404  # signed in: the study does not exist

    Token.objects.filter(pk=token.pk).update(created=timezone.now() - settings.TOKEN_MAX_AGE - timedelta(minutes=1))

    response = client.get(study_url)
    assert response.status_code == 403  # as for any bad credentials (session auth comes first)
    assert response.json()["detail"] == "The token has expired; ask staff for a new one."


def test_the_token_endpoint_counts_failures_with_the_login_pages_and_refuses_a_locked_account(client):
    make_user("scripted", staff=True)
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, "/accounts/login/", "scripted", f"guess-{n}")

    response = api_client().post("/api/auth/token/", {"username": "scripted", "password": PASSWORD}, format="json")

    assert response.status_code == 400 and "token" not in response.json()
    assert not Token.objects.filter(user__username="scripted").exists()


def test_a_password_change_revokes_the_accounts_api_tokens(client):
    annotator = make_annotator("ann")
    issued = api_client().post("/api/auth/token/", {"username": "ann", "password": PASSWORD}, format="json")
    token = issued.json()["token"]
    scripted = api_client()
    scripted.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert scripted.get("/api/annotate/999999/next/").status_code == 404  # signed in

    annotator.set_password("a-new-long-password-2")
    annotator.save()

    assert not Token.objects.filter(user=annotator).exists()
    assert scripted.get("/api/annotate/999999/next/").status_code in (401, 403)


def test_saving_an_account_without_changing_its_password_keeps_its_token():
    annotator = make_annotator("ann")
    token = Token.objects.create(user=annotator)

    annotator.first_name = "Ann"
    annotator.save()
    annotator.last_login = timezone.now()
    annotator.save(update_fields=["last_login"])

    assert Token.objects.filter(pk=token.pk).exists()


def test_the_password_change_form_revokes_the_token_too(client):
    make_user("admin", staff=True)
    token = Token.objects.create(user=User.objects.get(username="admin"))
    client.force_login(User.objects.get(username="admin"))

    response = client.post(
        "/admin/password_change/",
        {"old_password": PASSWORD, "new_password1": "a-new-long-password-2", "new_password2": "a-new-long-password-2"},
    )

    assert response.status_code == 302
    assert not Token.objects.filter(pk=token.pk).exists()
