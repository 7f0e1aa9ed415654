"""Invitations: staff invite an annotator by e-mail or a bare one-time link; its holder chooses
a username and password, gets an account granted the invited studies and lands on them. The link
works once and only until it expires; staff set a study's named annotators and cap."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.utils import timezone

from integrations.models import Invitation
from integrations.services.invitations import invite_annotator
from tests.factories import api_client, call_json_command, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-long-Passphrase-42"


def accept(client: Client, url: str, username: str = "scholar"):
    return client.post(url, {"username": username, "password1": NEW_PASSWORD, "password2": NEW_PASSWORD})


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def test_the_command_emails_a_one_time_link_that_creates_an_account_granted_the_study():
    study = make_relic_proxy_study(2)
    summary = call_json_command("invite_annotator", "--study", study.pk, "--email", "ada@example.org")
    assert summary["emailed"] is True and summary["studies"] == [study.pk]
    [message] = mail.outbox
    assert message.to == ["ada@example.org"] and summary["url"] in message.body and study.name in message.subject

    client = Client()
    response = accept(client, path_of(summary["url"]))
    assert response.status_code == 302 and response["Location"] == "/"
    user = get_user_model().objects.get(username="scholar")
    assert user.email == "ada@example.org" and user.check_password(NEW_PASSWORD)
    assert list(study.grants.values_list("annotator", flat=True)) == [user.pk]
    assert list(study.annotators.all()) == []  # granted, not named: the study stays open to everyone
    home = client.get("/")
    assert home.status_code == 200 and study.name in home.content.decode()
    assert Invitation.objects.get().accepted_by == user


def test_a_link_without_an_address_sends_nothing():
    study = make_relic_proxy_study(1)
    summary = call_json_command("invite_annotator", "--study", study.pk)
    assert summary["email"] == "" and summary["emailed"] is False and mail.outbox == []
    assert Client().get(path_of(summary["url"])).status_code == 200


def test_the_link_works_once():
    issued = invite_annotator(studies=[make_relic_proxy_study(1)])
    assert accept(Client(), issued.path, "first").status_code == 302
    second = accept(Client(), issued.path, "second")
    assert second.status_code == 410 and "used already or it has expired" in second.content.decode()
    assert not get_user_model().objects.filter(username="second").exists()


def test_an_expired_link_is_refused():
    issued = invite_annotator(studies=[make_relic_proxy_study(1)])
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get(issued.path).status_code == 410
    assert accept(Client(), issued.path).status_code == 410


def test_a_taken_username_or_a_weak_password_is_refused_and_the_link_still_works():
    make_user("taken")
    issued = invite_annotator(studies=[make_relic_proxy_study(1)])
    client = Client()
    taken = accept(client, issued.path, "taken")
    assert taken.status_code == 200 and "already exists" in taken.content.decode()
    weak = client.post(issued.path, {"username": "fresh", "password1": "123", "password2": "123"})
    assert weak.status_code == 200 and "too short" in weak.content.decode()
    assert accept(client, issued.path, "fresh").status_code == 302


def test_a_guessed_token_opens_nothing():
    invite_annotator(studies=[make_relic_proxy_study(1)])
    assert Client().get("/invitations/guessed-token/").status_code == 410


@pytest.mark.parametrize("email", ["not-an-address", "someone@"])
def test_a_bad_address_is_a_one_line_error_and_nothing_is_written(email):
    study = make_relic_proxy_study(1)
    response = api_client(make_user(staff=True)).post(
        "/api/invitations/", {"email": email, "studies": [study.pk]}, format="json"
    )
    assert response.status_code == 400 and "email" in response.json()
    assert Invitation.objects.count() == 0


def test_an_address_with_an_account_is_refused():
    make_user("ada").__class__.objects.filter(username="ada").update(email="ada@example.org")
    response = api_client(make_user(staff=True)).post(
        "/api/invitations/", {"email": "ADA@example.org", "studies": []}, format="json"
    )
    assert response.status_code == 400 and "already has an account" in response.json()["email"][0]


def test_staff_invite_through_the_api_and_get_the_link_once():
    study = make_relic_proxy_study(1)
    client = api_client(make_user(staff=True))
    created = client.post("/api/invitations/", {"email": "bo@example.org", "studies": [study.pk]}, format="json")
    assert created.status_code == 201 and created.json()["emailed"] is True
    assert created.json()["url"].startswith("http://testserver/invitations/")
    listed = client.get("/api/invitations/").json()
    assert [row["email"] for row in listed] == ["bo@example.org"] and "url" not in listed[0]


def test_staff_name_annotators_and_set_the_cap_through_the_api():
    study = make_relic_proxy_study(3)
    make_user("named")
    client = api_client(make_user(staff=True))
    changed = client.patch(
        f"/api/studies/{study.pk}/recruiting/", {"annotators": ["named"], "max_items_per_annotator": 2}, format="json"
    )
    assert changed.json() == {"study": study.pk, "annotators": ["named"], "max_items_per_annotator": 2, "granted": []}
    cleared = client.patch(f"/api/studies/{study.pk}/recruiting/", {"max_items_per_annotator": None}, format="json")
    assert cleared.json()["max_items_per_annotator"] is None and cleared.json()["annotators"] == ["named"]
    refused = client.patch(f"/api/studies/{study.pk}/recruiting/", {"max_items_per_annotator": 0}, format="json")
    assert refused.status_code == 400 and "max_items_per_annotator" in refused.json()


def test_the_recruiting_page_invites_and_shows_the_link_once(staff_client):
    study = make_relic_proxy_study(1)
    response = staff_client.post(f"/studies/{study.pk}/recruiting/invite/", {"email": ""}, follow=True)
    page = response.content.decode()
    assert 'id="new-invitation-url"' in page and "/invitations/" in page
    again = staff_client.get(f"/studies/{study.pk}/recruiting/").content.decode()
    assert 'id="new-invitation-url"' not in again and "(link)" in again


def test_the_recruiting_page_sets_named_annotators_and_the_cap(staff_client):
    study = make_relic_proxy_study(2)
    named = make_user("named")
    staff_client.post(
        f"/studies/{study.pk}/recruiting/annotators/", {"annotators": [named.pk], "max_items_per_annotator": "1"}
    )
    study.refresh_from_db()
    assert list(study.annotators.all()) == [named] and study.max_items_per_annotator == 1


def test_an_unknown_study_is_a_one_line_command_error():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="study"):
        call_command("invite_annotator", "--study", "999999")
    assert Invitation.objects.count() == 0
