"""Crowd participants through a Prolific-style link: the link creates or resumes a passwordless
participant bound to its id, serves at most the quota, then shows the completion code and sends
the participant back; screened-out and blocked participants get a plain page; and a link never
opens anyone else's work (another session with the same id, another study, another's code)."""

import hashlib

import pytest
from django.test import Client

from annotation.models import Judgment, Study
from annotation.services.quality import block_annotator
from integrations.models import Participant
from integrations.services.crowd import configure_crowd_link
from tests.factories import api_client, call_json_command, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def link():
    study = make_relic_proxy_study(5, judgments_per_item=2)
    return configure_crowd_link(
        study, completion_code="C0DE42", screened_out_code="SCREENED", quota=2, completion_url=""
    )


def visit(client, link, pid="PID1", session="S1", study="PS"):
    return client.get(f"/crowd/{link.slug}/", {"PROLIFIC_PID": pid, "STUDY_ID": study, "SESSION_ID": session})


def answer_current_item(client, study):
    page = client.get(f"/annotate/{study.pk}/")
    if page.status_code == 302:
        return page
    item = page.context["work"]["item"]
    return client.post(f"/annotate/{study.pk}/", {"item": item, "choice": 0, "seconds": 4}, follow=True)


def test_the_link_creates_a_participant_bound_to_the_id_and_sends_them_to_the_study(link):
    client = Client()
    response = visit(client, link)
    assert response.status_code == 302 and response["Location"] == f"/annotate/{link.study_id}/"
    participant = Participant.objects.get()
    assert (participant.external_id, participant.platform_study) == ("PID1", "PS")
    assert participant.session_digest == hashlib.sha256(b"S1").hexdigest()  # bound, never stored in clear
    assert participant.user.username == f"Participant-{participant.pk}"
    assert not participant.user.has_usable_password()
    assert client.get(f"/annotate/{link.study_id}/").status_code == 200


def test_mturk_names_work_too_and_its_preview_is_not_a_participant(link):
    response = Client().get(f"/crowd/{link.slug}/", {"workerId": "W9", "hitId": "H", "assignmentId": "A1"})
    assert response.status_code == 302 and Participant.objects.get().external_id == "W9"
    preview = Client().get(
        f"/crowd/{link.slug}/", {"workerId": "W8", "hitId": "H", "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"}
    )
    assert preview.status_code == 400 and "accept the hit" in preview.content.decode().lower()


def test_the_participant_finishes_the_quota_and_gets_the_completion_code(link, settings):
    settings.MARGINALIA_CROWD_REDIRECT_SECONDS = 3
    client = Client()
    visit(client, link)
    study = link.study
    answer_current_item(client, study)
    done = answer_current_item(client, study)
    assert done.redirect_chain[-1][0] == f"/crowd/{link.slug}/done/"
    page = done.content.decode()
    assert "C0DE42" in page and "https://app.prolific.com/submissions/complete?cc=C0DE42" in page
    assert 'http-equiv="refresh" content="3;' in page
    participant = Participant.objects.get()
    assert participant.status == Participant.Status.COMPLETED
    assert Judgment.objects.filter(annotator=participant.user).count() == 2
    # Coming back through the link shows the code again, and no more work.
    again = visit(Client(), link)
    assert again["Location"] == f"/crowd/{link.slug}/done/"


def test_the_done_page_withholds_the_code_until_the_work_is_done(link):
    client = Client()
    visit(client, link)
    early = client.get(f"/crowd/{link.slug}/done/")
    assert early.status_code == 302 and early["Location"] == f"/annotate/{link.study_id}/"


def test_a_second_participant_gets_fresh_work_and_the_first_one_resumes(link):
    first, second = Client(), Client()
    visit(first, link, pid="P1", session="S1")
    answer_current_item(first, link.study)
    visit(second, link, pid="P2", session="S2")
    second_item = second.get(f"/annotate/{link.study_id}/").context["work"]["item"]
    first_judged = Judgment.objects.get(annotator__participant__external_id="P1").item_id
    assert second_item != first_judged
    resumed = Client()
    visit(resumed, link, pid="P1", session="S1")
    assert resumed.get(f"/annotate/{link.study_id}/").context["work"]["progress"] == {"done": 1, "total": 2}
    assert Participant.objects.count() == 2


def test_the_same_id_in_another_session_cannot_take_over_the_participant(link):
    visit(Client(), link, pid="P1", session="S1")
    intruder = Client()
    response = visit(intruder, link, pid="P1", session="S-OTHER")
    assert response.status_code == 403 and "another session" in response.content.decode()
    assert intruder.get(f"/annotate/{link.study_id}/").status_code == 302  # not signed in


def test_a_participant_cannot_work_on_another_study_or_see_it_listed(link):
    other = make_relic_proxy_study(2, name="other-study")
    client = Client()
    visit(client, link)
    assert client.get(f"/annotate/{other.pk}/").status_code == 403
    assert client.get(f"/api/annotate/{other.pk}/next/").status_code == 403
    assert "other-study" not in client.get("/").content.decode()


def test_a_participant_cannot_read_another_links_completion_code(link):
    other_link = configure_crowd_link(make_relic_proxy_study(1), completion_code="OTHER-CODE")
    client = Client()
    visit(client, link)
    response = client.get(f"/crowd/{other_link.slug}/done/")
    assert response.status_code == 404 and "OTHER-CODE" not in response.content.decode()
    assert Client().get(f"/crowd/{link.slug}/done/").status_code == 404  # anonymous


def test_a_screened_out_participant_gets_a_clear_page_with_the_screen_out_code(link):
    client = Client()
    visit(client, link)
    name = Participant.objects.get().user.username
    summary = call_json_command("crowd_link", link.study_id, "--screen-out", "PID1")
    assert summary["screened_out"] == name
    assert summary["participants"][name] == {"participant": "PID1", "status": "screened_out", "judged": 0}
    response = visit(Client(), link)
    page = response.content.decode()
    assert response.status_code == 403 and "screened out" in page and "SCREENED" in page
    assert client.get(f"/annotate/{link.study_id}/").status_code == 403  # their open session is stopped too


def test_a_blocked_participant_gets_a_clear_page(link):
    visit(Client(), link)
    block_annotator(link.study, Participant.objects.get().user, by=None, reason="careless")
    response = visit(Client(), link)
    assert response.status_code == 403 and "blocked from this study" in response.content.decode()


@pytest.mark.parametrize("query", [{}, {"PROLIFIC_PID": "<script>"}, {"PROLIFIC_PID": "x" * 65}])
def test_a_missing_or_malformed_id_is_a_clear_400_and_creates_nobody(link, query):
    response = Client().get(f"/crowd/{link.slug}/", query)
    assert response.status_code == 400 and "PROLIFIC_PID" in response.content.decode()
    assert Participant.objects.count() == 0


def test_an_inactive_link_or_a_closed_study_takes_no_one(link):
    call_json_command("crowd_link", link.study_id, "--deactivate")
    assert visit(Client(), link).status_code == 403
    call_json_command("crowd_link", link.study_id, "--activate")
    Study.objects.filter(pk=link.study_id).update(status=Study.Status.CLOSED)
    assert visit(Client(), link).status_code == 403
    assert Participant.objects.count() == 0


def test_an_unknown_slug_is_404():
    assert Client().get("/crowd/guess/", {"PROLIFIC_PID": "P"}).status_code == 404


def test_the_command_prints_the_prolific_url_and_sets_the_quota():
    study = make_relic_proxy_study(3)
    summary = call_json_command("crowd_link", study.pk, "--quota", "2", "--completion-code", "XYZ")
    assert summary["url"].endswith(
        "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    )
    assert summary["quota"] == 2 and summary["completion_code"] == "XYZ" and summary["participants"] == {}
    assert call_json_command("crowd_link", study.pk, "--no-quota")["quota"] is None


def test_staff_manage_the_link_and_see_participants_through_the_api(link):
    visit(Client(), link)
    client = api_client(make_user(staff=True))
    changed = client.put(
        f"/api/studies/{link.study_id}/crowd-link/",
        {"completion_url": "https://example.org/done?code={code}", "quota": 3},
        format="json",
    ).json()
    assert changed["completion_url"] == "https://example.org/done?code=C0DE42" and changed["quota"] == 3
    [row] = client.get(f"/api/studies/{link.study_id}/participants/").json()
    name = Participant.objects.get().user.username
    assert (row["name"], row["participant"], row["status"], row["judged"]) == (name, "PID1", "active", 0)
    screened = client.post(f"/api/studies/{link.study_id}/participants/PID1/screen-out/", {}, format="json")
    assert screened.json() == {"name": name, "participant": "PID1", "status": "screened_out"}
    unknown = client.post(f"/api/studies/{link.study_id}/participants/NOBODY/screen-out/", {}, format="json")
    assert unknown.status_code == 400 and "participant" in unknown.json()
