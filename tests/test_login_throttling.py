"""Identities: sign-in is throttled per account and per address on /accounts/login/ and
/admin/login/ (django-axes), with a "too many attempts" page (429); sessions and API tokens
expire after the configured time."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.authtoken.models import Token

from tests.factories import api_client, make_annotator, make_user

pytestmark = pytest.mark.django_db

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


def test_the_account_is_locked_from_every_address_and_on_both_pages(client):
    make_user("admin", staff=True)
    for n in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, "/accounts/login/", "admin", f"guess-{n}", address=f"10.0.1.{n}")

    assert sign_in(client, "/admin/login/", "admin", PASSWORD, address="10.9.9.9").status_code == 429
    assert not signed_in(client)


def test_one_address_trying_many_accounts_is_locked(client):
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
