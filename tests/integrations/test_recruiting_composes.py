"""Recruiting that composes (issue 21, point 1), each finding as the first week's trial wrote it:

- accepting one invitation closed an open study to everyone else: the study became "only these
  annotators: scholar1", a lab annotator got 403 halfway through and the first Prolific
  participant 403 on the first click;
- invited accounts saw every open study, not the one they were invited to;
- and naming annotators is staff's decision: the page says who it will refuse, and the accounts
  the study was granted to (invitations, crowd participants) keep their access.

Quota and cap (the other half of the point) are in test_quota_and_cap.py."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from annotation.models import AnnotatorProfile, StudyGrant
from integrations.services.crowd import configure_crowd_link
from integrations.services.invitations import invite_annotator
from tests.factories import api_client, make_annotator, make_relic_proxy_study, make_user, next_url, submit_url

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-Passphrase-42"


def accept(issued, username: str = "scholar1") -> Client:
    client = Client()
    response = client.post(issued.path, {"username": username, "password1": PASSWORD, "password2": PASSWORD})
    assert response.status_code == 302, response.content.decode()[:500]
    return client


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def answer_next(client, study) -> int:
    """Claim the next item and answer it; the HTTP status of the submission (or of the claim
    when it was refused)."""
    claimed = client.get(next_url(study))
    if claimed.status_code != 200:
        return claimed.status_code
    return client.post(submit_url(study), {"item": claimed.json()["item"], "position": 0}).status_code


def participant(link, pid: str) -> Client:
    client = Client()
    client.get(f"/crowd/{link.slug}/", {"PROLIFIC_PID": pid, "STUDY_ID": "S", "SESSION_ID": f"session-{pid}"})
    return client


def test_accepting_an_invitation_leaves_an_open_study_open(staff_client):
    study = make_relic_proxy_study(6, judgments_per_item=3)
    link = configure_crowd_link(study, completion_code="C", quota=4)
    lab = signed_in(make_annotator("lab1"))
    assert answer_next(lab, study) == 201
    lab.get(next_url(study))  # halfway through: holds its next item
    crowd = participant(link, "PROLIFIC1")
    assert answer_next(crowd, study) == 201

    scholar = accept(invite_annotator(studies=[study], email="scholar1@example.org"))

    assert list(study.annotators.all()) == []  # not "only these annotators: scholar1"
    for who, client in (("lab annotator", lab), ("crowd participant", crowd), ("scholar", scholar)):
        assert answer_next(client, study) == 201, who
    second_participant = participant(link, "PROLIFIC2")  # the first click of the next one
    assert answer_next(second_participant, study) == 201
    page = staff_client.get(f"/studies/{study.pk}/recruiting/").content.decode()
    assert "Every active annotator may work on the study." in page and "scholar1" in page


def test_an_invited_account_works_on_the_studies_it_was_invited_to_only():
    invited, other = make_relic_proxy_study(2, name="invited-study"), make_relic_proxy_study(2, name="other-study")
    scholar = accept(invite_annotator(studies=[invited]))
    home = scholar.get("/").content.decode()
    assert "invited-study" in home and "other-study" not in home
    assert scholar.get(f"/annotate/{other.pk}/").status_code == 403
    refused = scholar.get(next_url(other))
    assert refused.status_code == 403 and "studies you were invited to" in refused.json()["detail"]
    assert answer_next(scholar, invited) == 201


def test_staff_widen_an_invited_account_to_every_open_study_and_back(staff_client):
    invited, other = make_relic_proxy_study(2, name="invited-study"), make_relic_proxy_study(2, name="other-study")
    scholar = accept(invite_annotator(studies=[invited]))
    page = staff_client.get(f"/studies/{invited.pk}/recruiting/").content.decode()
    assert 'data-granted="scholar1"' in page and "its granted studies only" in page

    staff_client.post(f"/studies/{invited.pk}/recruiting/scope/", {"username": "scholar1"})
    assert "other-study" in scholar.get("/").content.decode()
    assert answer_next(scholar, other) == 201

    staff_client.post(f"/studies/{invited.pk}/recruiting/scope/", {"username": "scholar1", "only_granted": "on"})
    assert "other-study" not in scholar.get("/").content.decode()


def test_an_invitation_may_say_every_open_study_from_the_start():
    invited = make_relic_proxy_study(1, name="invited-study")
    make_relic_proxy_study(1, name="other-study")
    created = api_client(make_user(staff=True)).post(
        "/api/invitations/", {"studies": [invited.pk], "only_invited_studies": False}, format="json"
    )
    assert created.status_code == 201 and created.json()["only_invited_studies"] is False
    scholar = Client()
    path = "/" + created.json()["url"].split("/", 3)[3]
    scholar.post(path, {"username": "wide", "password1": PASSWORD, "password2": PASSWORD})
    home = scholar.get("/").content.decode()
    assert "invited-study" in home and "other-study" in home


def test_an_invitation_to_a_study_that_names_its_annotators_lets_the_holder_in_without_naming_them():
    study = make_relic_proxy_study(3)
    named = make_annotator("named")
    study.annotators.set([named])
    scholar = accept(invite_annotator(studies=[study]))
    assert answer_next(scholar, study) == 201
    assert list(study.annotators.all()) == [named]
    assert answer_next(signed_in(make_annotator("unnamed")), study) == 403


def test_naming_annotators_is_staffs_decision_and_keeps_granted_accounts_and_the_crowd_in(staff_client):
    study = make_relic_proxy_study(6, judgments_per_item=3)
    link = configure_crowd_link(study, completion_code="C")
    named, unnamed = make_annotator("named"), make_annotator("unnamed")
    unnamed_client = signed_in(unnamed)
    assert answer_next(unnamed_client, study) == 201
    crowd = participant(link, "PROLIFIC1")
    scholar = accept(invite_annotator(studies=[study]))

    saved = staff_client.post(f"/studies/{study.pk}/recruiting/annotators/", {"annotators": [named.pk]}, follow=True)
    message = saved.content.decode()
    assert "Refused from now on: unnamed (1 judged)." in message

    assert answer_next(unnamed_client, study) == 403
    for who, client in (("named", signed_in(named)), ("crowd", crowd), ("scholar", scholar)):
        assert answer_next(client, study) == 201, who


def test_the_recruiting_page_lists_who_naming_annotators_would_refuse(staff_client):
    study = make_relic_proxy_study(4, judgments_per_item=2)
    worker = make_annotator("worker")
    lab = signed_in(worker)
    answer_next(lab, study)
    answer_next(lab, study)
    accept(invite_annotator(studies=[study]))  # granted: never among those refused
    page = staff_client.get(f"/studies/{study.pk}/recruiting/")
    assert page.context["workers"] == [{"id": worker.pk, "username": "worker", "judged": 2}]
    html = page.content.decode()
    assert 'id="narrowing-warning"' in html and 'id="study-workers"' in html
    assert "Selecting annotators closes the study to every annotator not selected" in html


def test_staff_grant_an_existing_account_access_and_the_study_stays_open(staff_client):
    study, other = make_relic_proxy_study(2), make_relic_proxy_study(2, name="other-study")
    scholar = accept(invite_annotator(studies=[other]))
    assert answer_next(scholar, study) == 403
    staff_client.post(f"/studies/{study.pk}/recruiting/grant/", {"username": "scholar1"})
    assert answer_next(scholar, study) == 201
    assert list(study.annotators.all()) == []
    assert answer_next(signed_in(make_annotator("lab")), study) == 201


def test_the_api_grants_widens_and_narrows_and_refuses_crowd_accounts_and_unknown_names():
    study = make_relic_proxy_study(2)
    link = configure_crowd_link(study, completion_code="C")
    participant(link, "P1")
    make_user("reader")
    client = api_client(make_user(staff=True))
    url = f"/api/studies/{study.pk}/recruiting/"
    changed = client.patch(url, {"grant": ["reader"], "widen": ["reader"]}, format="json").json()
    assert changed["granted"] == [{"username": "reader", "only_granted": False, "studies": [study.name]}]
    assert changed["annotators"] == []
    narrowed = client.patch(url, {"narrow": ["reader"]}, format="json").json()
    assert narrowed["granted"][0]["only_granted"] is True
    crowd_name = StudyGrant.objects.get(annotator__participant__isnull=False).annotator.username
    for body in ({"widen": [crowd_name]}, {"grant": ["nobody"]}, {"grant": ["reader"], "widen": [crowd_name]}):
        refused = client.patch(url, body, format="json")
        assert refused.status_code == 400 and "username" in refused.json()
    assert AnnotatorProfile.objects.get(user__username=crowd_name).only_granted is True


def test_an_address_with_an_account_is_told_to_grant_that_account_access():
    user = make_user("ada")
    user.email = "ada@example.org"
    user.save()
    refused = api_client(make_user(staff=True)).post(
        "/api/invitations/", {"email": "ADA@example.org", "studies": []}, format="json"
    )
    assert refused.status_code == 400 and "give it access on the study's recruiting page" in refused.json()["email"][0]


@pytest.mark.parametrize("username", ["participant-3", "Participant-12", "PARTICIPANT-new-1"])
def test_crowd_names_cannot_be_taken_by_an_invited_account(username):
    issued = invite_annotator(studies=[make_relic_proxy_study(1)])
    response = Client().post(issued.path, {"username": username, "password1": PASSWORD, "password2": PASSWORD})
    assert response.status_code == 200 and "kept for crowd participants" in response.content.decode()
    assert not get_user_model().objects.filter(username__iexact=username).exists()
    accept(issued, "fine-name")  # the link still works
