"""Attacks on recruiting: annotators (by session or token), crowd participants, invited accounts
and anonymous visitors try every recruiting route (inviting, naming annotators, the cap,
granting and widening accounts, the crowd link and its quota, its participants, screening out)
and change nothing; every role, staff without any permission included, tries the public crowd
and invitation routes to become someone else and fails. The project-wide route sweep in
tests/annotation/test_attacks.py holds these routes to the staff rule as well."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import AnnotatorProfile, Judgment, Study, StudyGrant
from integrations.models import CrowdLink, Invitation, Participant
from integrations.services.crowd import configure_crowd_link
from integrations.services.invitations import invite_annotator
from tests.factories import make_annotator, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db

VICTIM = {"PROLIFIC_PID": "VICTIM", "STUDY_ID": "S", "SESSION_ID": "S1"}
PASSWORD = "a-long-Passphrase-42"


@pytest.fixture
def world():
    study = make_relic_proxy_study(3)
    link = configure_crowd_link(study, completion_code="SECRET-CODE", quota=1)
    victim = Client()
    victim.get(f"/crowd/{link.slug}/", VICTIM)
    victim.get(f"/api/annotate/{study.pk}/next/")  # holds a claim
    used = invite_annotator(studies=[study])
    Client().post(used.path, {"username": "scholar", "password1": PASSWORD, "password2": PASSWORD})
    return {"study": study, "link": link, "used_invitation": used.path}


def fingerprint() -> dict:
    return {
        "invitations": sorted(Invitation.objects.values_list("pk", "accepted_by")),
        "studies": sorted(Study.objects.values_list("pk", "max_items_per_annotator")),
        "annotators": sorted(Study.annotators.through.objects.values_list("study_id", "user_id")),
        "grants": sorted(StudyGrant.objects.values_list("study_id", "annotator_id", "item_quota")),
        "scopes": sorted(AnnotatorProfile.objects.values_list("user_id", "only_granted")),
        "links": sorted(CrowdLink.objects.values_list("pk", "completion_code", "completion_url", "quota", "active")),
        "participants": sorted(Participant.objects.values_list("pk", "status", "user__username")),
        "users": get_user_model().objects.count(),
        "judgments": sorted(Judgment.objects.values_list("pk", "annotator_id", "item_id")),
    }


def non_staff_clients(link) -> dict:
    annotator = make_annotator("attacker")
    session = Client()
    session.force_login(annotator)
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=annotator).key}")
    participant = Client()
    participant.get(f"/crowd/{link.slug}/", {"PROLIFIC_PID": "ATTACKER", "SESSION_ID": "S9"})
    invited = Client()
    invited.force_login(get_user_model().objects.get(username="scholar"))
    return {
        "anonymous": Client(),
        "annotator": session,
        "token": token,
        "participant": participant,
        "invited": invited,
    }


def attacks(study_id: int) -> list[tuple[str, str, dict]]:
    return [
        ("post", "/api/invitations/", {"email": "x@example.org", "studies": [study_id]}),
        ("get", "/api/invitations/", {}),
        ("patch", f"/api/studies/{study_id}/recruiting/", {"max_items_per_annotator": 99}),
        ("patch", f"/api/studies/{study_id}/recruiting/", {"grant": ["attacker"], "widen": ["scholar"]}),
        ("get", f"/api/studies/{study_id}/recruiting/", {}),
        ("put", f"/api/studies/{study_id}/crowd-link/", {"completion_code": "MINE", "quota": 99}),
        ("get", f"/api/studies/{study_id}/crowd-link/", {}),
        ("get", f"/api/studies/{study_id}/participants/", {}),
        ("post", f"/api/studies/{study_id}/participants/VICTIM/screen-out/", {}),
        ("get", f"/studies/{study_id}/recruiting/", {}),
        ("post", f"/studies/{study_id}/recruiting/invite/", {"email": ""}),
        ("post", f"/studies/{study_id}/recruiting/annotators/", {"max_items_per_annotator": "99"}),
        ("post", f"/studies/{study_id}/recruiting/grant/", {"username": "attacker"}),
        ("post", f"/studies/{study_id}/recruiting/scope/", {"username": "scholar"}),
        ("post", f"/studies/{study_id}/recruiting/crowd/", {"completion_code": "MINE", "quota": "99"}),
        ("post", f"/studies/{study_id}/recruiting/screen-out/", {"participant": "VICTIM"}),
    ]


def test_nobody_but_staff_can_invite_recruit_or_manage_the_crowd_link(world):
    clients = non_staff_clients(world["link"])
    before = fingerprint()
    for who, client in clients.items():
        for method, path, data in attacks(world["study"].pk):
            if isinstance(client, APIClient):
                response = getattr(client, method)(path, data, format="json")
            else:
                response = getattr(client, method)(path, data, content_type="application/json")
            refused = response.status_code in (401, 403) or (
                response.status_code == 302 and response["Location"].startswith("/accounts/login/")
            )
            assert refused, f"{who} {method.upper()} {path} answered {response.status_code}"
            assert "SECRET-CODE" not in response.content.decode(errors="replace")
    assert fingerprint() == before


def signed_in_as(client) -> str | None:
    return client.session.get("_auth_user_id") if hasattr(client, "session") else None


def test_no_role_becomes_another_participant_or_reads_a_code_through_the_public_routes(world):
    """As anonymous, an annotator, another participant, an invited account and a staff account
    without any permission: the victim's id without a session id, with an empty or a guessed
    one, by GET or POST; the link's completion page; a used or guessed invitation token. Nobody
    is signed in as anyone else, nothing is written, the code never shows."""
    link, slug = world["link"], world["link"].slug
    clients = {**non_staff_clients(link), "staff": Client()}
    clients.pop("token")  # the public routes are pages: a token signs nothing in there
    clients["staff"].force_login(make_user("curator", staff=True))
    other_study_link = configure_crowd_link(make_relic_proxy_study(1, name="other"), completion_code="OTHER-CODE")
    Client().get(f"/crowd/{other_study_link.slug}/", {"PROLIFIC_PID": "NEIGHBOUR", "SESSION_ID": "N1"})
    before = fingerprint()
    attempts = [
        ("get", f"/crowd/{slug}/", {"PROLIFIC_PID": "VICTIM", "STUDY_ID": "S"}, (400,)),
        ("get", f"/crowd/{slug}/", {"PROLIFIC_PID": "VICTIM", "STUDY_ID": "S", "SESSION_ID": ""}, (400,)),
        ("get", f"/crowd/{slug}/", {"PROLIFIC_PID": "VICTIM", "STUDY_ID": "S", "SESSION_ID": "S2"}, (403,)),
        ("post", f"/crowd/{slug}/?PROLIFIC_PID=VICTIM&STUDY_ID=S", {}, (400, 403)),
        ("post", f"/crowd/{slug}/?PROLIFIC_PID=VICTIM&STUDY_ID=S&SESSION_ID=S2", {}, (403,)),
        ("get", f"/crowd/{slug}/", {"workerId": "VICTIM", "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"}, (400,)),
        ("get", f"/crowd/{other_study_link.slug}/done/", {}, (404,)),
        ("get", world["used_invitation"], {}, (410,)),
        ("post", world["used_invitation"], {"username": "x1", "password1": PASSWORD, "password2": PASSWORD}, (410,)),
        ("get", "/invitations/guessed-token/", {}, (410,)),
    ]
    for who, client in clients.items():
        me = signed_in_as(client)
        for method, path, data, expected in attempts:
            response = getattr(client, method)(path, data)
            assert response.status_code in expected, f"{who} {method.upper()} {path} {data}: {response.status_code}"
            body = response.content.decode(errors="replace")
            assert "SECRET-CODE" not in body and "OTHER-CODE" not in body
            assert signed_in_as(client) == me, f"{who} {method.upper()} {path} changed who is signed in"
        done = client.get(f"/crowd/{slug}/done/")  # only their own participant's page, once they finish
        assert done.status_code in (302, 404) and "SECRET-CODE" not in done.content.decode(errors="replace")
    assert fingerprint() == before


def test_a_participant_cannot_sign_in_with_a_password_or_open_the_admin(world):
    participant = Participant.objects.get(external_id="VICTIM")
    client = Client()
    client.post("/accounts/login/", {"username": participant.user.username, "password": ""})
    assert "_auth_user_id" not in client.session
    signed_in = Client()
    signed_in.get(f"/crowd/{world['link'].slug}/", VICTIM)
    assert signed_in.get("/admin/").status_code == 302
    assert signed_in.get("/dashboard/").status_code in (302, 403)


def test_a_participant_cannot_reach_another_participants_claim_or_answer_for_them(world):
    study = world["study"]
    victim = Participant.objects.get(external_id="VICTIM")
    victim_client = Client()
    victim_client.force_login(victim.user)
    victim_item = victim_client.get(f"/api/annotate/{study.pk}/next/").json()["item"]
    attacker = Client()
    attacker.get(f"/crowd/{world['link'].slug}/", {"PROLIFIC_PID": "ATTACKER", "SESSION_ID": "S9"})
    attacker_next = attacker.get(f"/api/annotate/{study.pk}/next/").json()
    assert attacker_next["item"] != victim_item
    forged = attacker.post(
        f"/api/annotate/{study.pk}/submit/", {"item": victim_item, "position": 0}, content_type="application/json"
    )
    assert forged.status_code in (400, 403, 409)
    assert not victim.user.judgments.exists()


def test_a_participant_account_gets_no_api_token(world):
    participant = Participant.objects.get(external_id="VICTIM")
    for password in ("", "password", "!"):
        response = APIClient().post(
            "/api/auth/token/", {"username": participant.user.username, "password": password}, format="json"
        )
        assert response.status_code == 400
    assert not Token.objects.filter(user=participant.user).exists()


def test_the_token_endpoint_gives_the_account_its_token_and_renews_an_expired_one(settings):
    make_annotator("reader", password="reader-pass-123")
    first = APIClient().post("/api/auth/token/", {"username": "reader", "password": "reader-pass-123"}, format="json")
    assert first.status_code == 200
    again = APIClient().post("/api/auth/token/", {"username": "reader", "password": "reader-pass-123"}, format="json")
    assert again.json() == first.json()
    Token.objects.update(created=timezone.now() - settings.TOKEN_MAX_AGE - timedelta(minutes=1))
    renewed = APIClient().post("/api/auth/token/", {"username": "reader", "password": "reader-pass-123"}, format="json")
    assert renewed.json()["token"] != first.json()["token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {renewed.json()['token']}")
    assert client.get("/api/schema/").status_code == 200
