"""Crowd identities cannot be borrowed (issue 20, point 3). Each finding as the attack run wrote it:

- `?PROLIFIC_PID=VICTIM&STUDY_ID=S` with no (or an empty) SESSION_ID signed in as the victim,
  showed their progress and undo window, and stored a submit under their account;
- a participant who first came without a session id could be taken with any;
- crowd links created accounts for anyone without limit (300 in 7.4 s);
- a cross-site GET replaced a signed-in staff session with a participant's.

And what a returning participant legitimately does keeps working: the same link again in a new
tab, after losing the cookie, or from another device."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from annotation.models import Judgment, StudyGrant
from integrations.models import Participant
from integrations.services.crowd import _create_participant, configure_crowd_link
from tests.factories import make_relic_proxy_study, make_user, response_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def link():
    return configure_crowd_link(make_relic_proxy_study(4, judgments_per_item=2), completion_code="C0DE", quota=3)


def entry(link) -> str:
    return f"/crowd/{link.slug}/"


def visit(client, link, **ids):
    return client.get(entry(link), ids)


def signed_in_user_id(client):
    return client.session.get("_auth_user_id")


@pytest.fixture
def victim(link):
    """A participant who came through Prolific's link and judged one item."""
    client = Client()
    visit(client, link, PROLIFIC_PID="VICTIM", STUDY_ID="S", SESSION_ID="victim-session")
    item = client.get(f"/api/annotate/{link.study_id}/next/").json()["item"]
    assert client.post(f"/api/annotate/{link.study_id}/submit/", {"item": item, "position": 0}).status_code == 201
    return Participant.objects.get(external_id="VICTIM")


@pytest.mark.parametrize("session", [None, ""], ids=["no SESSION_ID", "empty SESSION_ID"])
def test_the_victims_id_without_a_session_id_opens_nothing(link, victim, session):
    attacker = Client()
    ids = {"PROLIFIC_PID": "VICTIM", "STUDY_ID": "S"} | ({} if session is None else {"SESSION_ID": session})
    response = visit(attacker, link, **ids)
    assert response.status_code == 400 and "SESSION_ID" in response.content.decode()
    assert signed_in_user_id(attacker) is None
    # Their progress, undo window and claim stay out of reach; a submit is refused, nothing stored.
    assert attacker.get(f"/api/annotate/{link.study_id}/undo/").status_code in (401, 403)
    assert attacker.get(f"/annotate/{link.study_id}/").status_code == 302
    submit = attacker.post(f"/api/annotate/{link.study_id}/submit/", {"item": 1, "position": 0})
    assert submit.status_code in (401, 403)
    assert Judgment.objects.filter(annotator=victim.user).count() == 1


def test_the_victims_id_with_another_session_id_is_refused(link, victim):
    attacker = Client()
    response = visit(attacker, link, PROLIFIC_PID="VICTIM", STUDY_ID="S", SESSION_ID="guessed")
    assert response.status_code == 403 and "another session" in response.content.decode()
    assert signed_in_user_id(attacker) is None


def test_a_participant_who_first_came_without_a_session_id_cannot_be_taken_with_any(link):
    """Made before binding existed (the migration keeps their empty binding): no session id can
    prove who they are, so nobody resumes them."""
    client = Client()
    visit(client, link, PROLIFIC_PID="OLD", SESSION_ID="first")
    Participant.objects.filter(external_id="OLD").update(session_digest="")
    for session in ("first", "anything", "x"):
        attacker = Client()
        response = visit(attacker, link, PROLIFIC_PID="OLD", SESSION_ID=session)
        assert response.status_code == 403 and signed_in_user_id(attacker) is None


def test_a_race_for_a_new_id_never_hands_the_first_comers_account_to_another_session(link):
    """Two first visits with one id arriving together: the loser of the insert resumes the
    winner only with the winner's session id."""
    visit(Client(), link, PROLIFIC_PID="RACE", SESSION_ID="winner")
    from integrations.services.crowd import CrowdRefusal

    with pytest.raises(CrowdRefusal, match="another session"):
        _create_participant(link, {"external_id": "RACE", "platform_study": "", "session": "loser"}, "10.0.0.9")
    resumed = _create_participant(link, {"external_id": "RACE", "platform_study": "", "session": "winner"}, "10.0.0.9")
    assert resumed.external_id == "RACE" and Participant.objects.count() == 1


def test_a_returning_participant_resumes_in_a_new_tab_after_losing_the_cookie_and_on_another_device(link, victim):
    ids = {"PROLIFIC_PID": "VICTIM", "STUDY_ID": "S", "SESSION_ID": "victim-session"}
    tab = Client()
    first = visit(tab, link, **ids)
    second_tab = visit(tab, link, **ids)  # signed in as themselves: no confirmation step
    assert first.status_code == second_tab.status_code == 302
    assert second_tab["Location"] == f"/annotate/{link.study_id}/"
    cookie_lost = Client()
    visit(cookie_lost, link, **ids)
    assert int(signed_in_user_id(cookie_lost)) == victim.user_id
    progress = cookie_lost.get(f"/api/annotate/{link.study_id}/next/").json()["progress"]
    assert progress == {"done": 1, "total": 3}
    assert Participant.objects.count() == 1


# --- throttling ---------------------------------------------------------------------------------


def test_one_address_no_longer_makes_300_accounts(link, settings):
    """The attack: 300 distinct ids from one address, each a new account. Now the address makes
    MARGINALIA_CROWD_NEW_PER_ADDRESS_PER_HOUR of them and gets 429 with Retry-After after that."""
    statuses = [
        visit(Client(REMOTE_ADDR="203.0.113.7"), link, PROLIFIC_PID=f"BOT{n}", SESSION_ID=f"s{n}").status_code
        for n in range(300)
    ]
    allowed = settings.MARGINALIA_CROWD_NEW_PER_ADDRESS_PER_HOUR
    assert statuses.count(302) == allowed and statuses.count(429) == 300 - allowed
    assert Participant.objects.count() == allowed
    assert get_user_model().objects.filter(username__startswith="Participant-").count() == allowed
    refused = visit(Client(REMOTE_ADDR="203.0.113.7"), link, PROLIFIC_PID="BOT-LAST", SESSION_ID="s")
    assert 3500 < int(refused["Retry-After"]) <= 3601 and "try again later" in refused.content.decode()
    # Someone else is not held back by that address, and the bots' first ids still resume.
    assert visit(Client(REMOTE_ADDR="198.51.100.1"), link, PROLIFIC_PID="REAL", SESSION_ID="r").status_code == 302
    assert visit(Client(REMOTE_ADDR="203.0.113.7"), link, PROLIFIC_PID="BOT0", SESSION_ID="s0").status_code == 302


def test_a_link_takes_so_many_new_participants_a_minute_and_returning_ones_always(link, settings):
    settings.MARGINALIA_CROWD_NEW_PER_LINK_PER_MINUTE = 3
    for n in range(3):
        arrival = visit(Client(REMOTE_ADDR=f"198.51.100.{n}"), link, PROLIFIC_PID=f"P{n}", SESSION_ID="s")
        assert arrival.status_code == 302
    crowded = visit(Client(REMOTE_ADDR="198.51.100.9"), link, PROLIFIC_PID="P9", SESSION_ID="s")
    assert crowded.status_code == 429 and crowded["Retry-After"] == "60"
    assert "try again in a minute" in crowded.content.decode()
    assert Participant.objects.count() == 3
    assert visit(Client(REMOTE_ADDR="198.51.100.0"), link, PROLIFIC_PID="P0", SESSION_ID="s").status_code == 302
    other_link = configure_crowd_link(make_relic_proxy_study(1, name="elsewhere"), completion_code="X")
    assert visit(Client(REMOTE_ADDR="198.51.100.9"), other_link, PROLIFIC_PID="P9", SESSION_ID="s").status_code == 302


# --- no GET replaces a signed-in session ----------------------------------------------------------


def test_a_cross_site_get_does_not_replace_a_staff_session(link):
    staff = make_user("curator", staff=True)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff)
    response = visit(browser, link, PROLIFIC_PID="LURED", STUDY_ID="S", SESSION_ID="s")
    page = response.content.decode()
    assert response.status_code == 200 and 'id="crowd-confirm"' in page and "curator" in page
    assert int(signed_in_user_id(browser)) == staff.pk and not Participant.objects.exists()
    assert browser.get("/dashboard/").status_code == 200
    # A forged POST without the page's CSRF token changes nothing either.
    query = "?PROLIFIC_PID=LURED&STUDY_ID=S&SESSION_ID=s"
    assert browser.post(entry(link) + query).status_code == 403
    assert int(signed_in_user_id(browser)) == staff.pk and not Participant.objects.exists()
    # The page's own button (its form and token) is the way in.
    token = response.context["csrf_token"]
    confirmed = browser.post(entry(link) + query, {"csrfmiddlewaretoken": str(token)})
    assert confirmed.status_code == 302 and confirmed["Location"] == f"/annotate/{link.study_id}/"
    participant = Participant.objects.get(external_id="LURED")
    assert int(signed_in_user_id(browser)) == participant.user_id


def test_another_participants_link_asks_before_switching_accounts(link, victim):
    browser = Client()
    visit(browser, link, PROLIFIC_PID="VICTIM", STUDY_ID="S", SESSION_ID="victim-session")
    response = visit(browser, link, PROLIFIC_PID="SECOND", STUDY_ID="S", SESSION_ID="s2")
    assert response.status_code == 200 and victim.user.username in response.content.decode()
    assert int(signed_in_user_id(browser)) == victim.user_id and Participant.objects.count() == 1


def test_refusals_show_before_any_confirmation_and_change_nothing(link, victim):
    staff = make_user("curator", staff=True)
    browser = Client()
    browser.force_login(staff)
    assert visit(browser, link, PROLIFIC_PID="VICTIM", SESSION_ID="wrong").status_code == 403
    assert visit(browser, link, PROLIFIC_PID="VICTIM").status_code == 400
    assert int(signed_in_user_id(browser)) == staff.pk


# --- names --------------------------------------------------------------------------------------


def test_participants_are_shown_as_participant_n_never_by_their_platform_id(link, victim, staff_client):
    name = victim.user.username
    assert name == f"Participant-{victim.pk}" and "VICTIM" not in name
    participant = Client()
    visit(participant, link, PROLIFIC_PID="VICTIM", STUDY_ID="S", SESSION_ID="victim-session")
    for path in ("/", f"/annotate/{link.study_id}/"):
        page = participant.get(path).content.decode()
        assert name in page and "VICTIM" not in page
    study_page = staff_client.get(f"/studies/{link.study_id}/").content.decode()
    assert name in study_page and "VICTIM" not in study_page
    exported = response_text(staff_client.get(f"/api/judgments/?study={link.study_id}&format=json"))
    assert name in exported and "VICTIM" not in exported
    # Where staff screen someone out, they can still look the platform id up.
    recruiting = staff_client.get(f"/studies/{link.study_id}/recruiting/").content.decode()
    assert name in recruiting and "VICTIM" in recruiting
    screened = staff_client.post(
        f"/studies/{link.study_id}/recruiting/screen-out/", {"participant": name, "reason": "bot"}, follow=True
    )
    assert f"{name} screened out" in screened.content.decode()
    assert Participant.objects.get(pk=victim.pk).status == Participant.Status.SCREENED_OUT


def test_a_participants_account_is_granted_its_study_with_the_links_quota(link):
    visit(Client(), link, PROLIFIC_PID="P1", SESSION_ID="s")
    grant = StudyGrant.objects.get(annotator__participant__external_id="P1")
    assert (grant.study_id, grant.item_quota) == (link.study_id, 3)
    assert grant.annotator.annotator_profile.only_granted
    configure_crowd_link(link.study, quota=None)
    grant.refresh_from_db()
    assert grant.item_quota is None
