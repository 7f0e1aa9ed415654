"""One public address for every link (issue 21, point 1). The finding: links printed by commands
pointed at localhost:8000 whatever port the platform ran on. Now MARGINALIA_BASE_URL, when set,
is the base of every link, web and command line; left empty, a web request's links use the
address it came to and a command's the one run_platform was started on (a command run in
another terminal while run_platform runs: tests/test_settings_and_deploy.py)."""

import pytest
from django.core import mail

from integrations.services.crowd import configure_crowd_link
from marginalia.public_address import announce, announced_address, withdraw
from tests.factories import api_client, call_json_command, make_relic_proxy_study, make_user

PUBLIC = "https://marginalia.example.org"


@pytest.mark.django_db
def test_a_configured_public_address_is_the_base_of_every_link(settings, staff_client):
    settings.MARGINALIA_BASE_URL = PUBLIC + "/"
    study = make_relic_proxy_study(1)
    assert call_json_command("crowd_link", study.pk)["url"].startswith(f"{PUBLIC}/crowd/")
    invited = call_json_command("invite_annotator", "--study", study.pk, "--email", "ada@example.org")
    assert invited["url"].startswith(f"{PUBLIC}/invitations/") and invited["url"] in mail.outbox[-1].body
    api = api_client(make_user(staff=True))
    assert api.get(f"/api/studies/{study.pk}/crowd-link/").json()["url"].startswith(f"{PUBLIC}/crowd/")
    created = api.post("/api/invitations/", {"email": "bo@example.org", "studies": [study.pk]}, format="json").json()
    assert created["url"].startswith(f"{PUBLIC}/invitations/") and created["url"] in mail.outbox[-1].body
    staff_client.post(f"/studies/{study.pk}/recruiting/invite/", {"email": "cy@example.org"})
    page = staff_client.get(f"/studies/{study.pk}/recruiting/")
    assert page.context["link_url"].startswith(f"{PUBLIC}/crowd/")
    assert f"{PUBLIC}/invitations/" in page.content.decode() and f"{PUBLIC}/invitations/" in mail.outbox[-1].body


@pytest.mark.django_db
def test_without_one_requests_use_their_own_address_and_commands_the_announced_one(settings):
    settings.MARGINALIA_BASE_URL = ""
    study = make_relic_proxy_study(1)
    configure_crowd_link(study, completion_code="C")
    api = api_client(make_user(staff=True))
    assert api.get(f"/api/studies/{study.pk}/crowd-link/").json()["url"].startswith("http://testserver/crowd/")
    assert call_json_command("crowd_link", study.pk)["url"].startswith("http://localhost:8000/crowd/")
    announce("http://127.0.0.1:8765")
    assert call_json_command("crowd_link", study.pk)["url"].startswith("http://127.0.0.1:8765/crowd/")
    assert call_json_command("invite_annotator")["url"].startswith("http://127.0.0.1:8765/invitations/")
    withdraw()
    assert announced_address() is None
    assert call_json_command("invite_annotator")["url"].startswith("http://localhost:8000/invitations/")
