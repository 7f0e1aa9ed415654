"""Recruiting in a real Chromium: an invited annotator accepts the one-time link, chooses a
password and annotates; a crowd participant arriving from Prolific finishes the link's quota,
sees the completion code and is sent back; a second participant id gets fresh work; the
recruiting page says whom naming annotators would refuse before staff save; a crowd link opened
in a signed-in browser asks before it switches accounts."""

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from annotation.models import Judgment
from annotation.services import claim_next_item, submit_judgment
from integrations.models import Participant
from integrations.services.crowd import configure_crowd_link
from integrations.services.invitations import accept_invitation, invite_annotator
from tests.browser.conftest import sign_in
from tests.factories import make_annotator, make_relic_proxy_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def answer_first_candidate(page, done_after: str) -> None:
    # Reached by a click, the page may still be running its deferred script, which is what
    # listens for the keys: wait for it as page.goto does.
    page.wait_for_load_state("load")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#progress-text")).to_have_text(done_after)


def test_an_invited_annotator_accepts_the_link_and_annotates(page):
    study = make_relic_proxy_study(3, guidelines="Choose the sentence the critic quoted.")
    issued = invite_annotator(studies=[study], email="ada@example.org")
    page.goto(issued.path)
    expect(page.locator("#invitation")).to_contain_text(study.name)
    page.fill("#id_username", "ada")
    page.fill("#id_password1", "a-long-Passphrase-42")
    page.fill("#id_password2", "a-long-Passphrase-42")
    page.get_by_role("button", name="Create my account").click()
    page.wait_for_url(re.compile(r"/$"))
    expect(page.locator("main")).to_contain_text(study.name)
    page.get_by_role("link", name="Start").click()
    expect(page.locator("#progress-text")).to_have_text("0 / 3")
    answer_first_candidate(page, "1 / 3")
    assert Judgment.objects.filter(annotator__username="ada", item__study=study).count() == 1
    # The link was for one use only.
    page.goto(issued.path)
    expect(page.locator("h1")).to_have_text("This invitation link no longer works")


def test_a_crowd_participant_finishes_the_quota_sees_the_code_and_a_second_one_gets_fresh_work(
    browser, live_server, settings
):
    settings.MARGINALIA_CROWD_REDIRECT_SECONDS = 2
    study = make_relic_proxy_study(5, judgments_per_item=1)
    link = configure_crowd_link(
        study, completion_code="CC-7731", quota=2, completion_url=f"{live_server.url}/accounts/login/?cc={{code}}"
    )

    def participant_page(pid: str):
        context = browser.new_context(base_url=live_server.url)
        context.set_default_timeout(20_000)
        tab = context.new_page()
        tab.goto(f"/crowd/{link.slug}/?PROLIFIC_PID={pid}&STUDY_ID=prolific-study&SESSION_ID=session-{pid}")
        return context, tab

    first_context, first = participant_page("5f0c1a2b3c4d5e6f7a8b9c0d")
    expect(first.locator("#progress-text")).to_have_text("0 / 2")
    answer_first_candidate(first, "1 / 2")
    first.keyboard.press("1")
    first.keyboard.press("Enter")
    expect(first.locator("#completion-code")).to_have_text("CC-7731")
    first.wait_for_url(re.compile(r"/accounts/login/\?cc=CC-7731$"))  # sent back to the platform
    first_items = set(Judgment.objects.filter(item__study=study).values_list("item_id", flat=True))
    assert len(first_items) == 2
    first_context.close()

    second_context, second = participant_page("6a1b2c3d4e5f6a7b8c9d0e1f")
    expect(second.locator("#progress-text")).to_have_text("0 / 2")
    shown = int(second.locator("#judgment-form input[name=item]").input_value())
    assert shown not in first_items
    answer_first_candidate(second, "1 / 2")
    second_context.close()
    assert Judgment.objects.filter(item__study=study).count() == 3


def test_the_recruiting_page_says_whom_naming_annotators_would_refuse_before_saving(page):
    study = make_relic_proxy_study(4, judgments_per_item=3)
    make_user("curator", staff=True)
    reader, named = make_annotator("reader"), make_annotator("named")
    for _ in range(2):
        assignment = claim_next_item(study, reader)
        submit_judgment(annotator=reader, item=assignment.item, position=0)
    scholar = invite_annotator(studies=[study])
    accept_invitation(scholar.token, username="scholar", password="a-long-Passphrase-42")
    assignment = claim_next_item(study, get_user_model().objects.get(username="scholar"))

    sign_in(page, "curator")
    page.goto(f"/studies/{study.pk}/recruiting/")
    warning = page.locator("#narrowing-warning")
    expect(warning).to_be_hidden()
    page.select_option("#id_annotators", label="named")
    expect(warning).to_be_visible()
    expect(warning).to_contain_text("1 person who has worked on it would be refused: reader (2 judged)")
    expect(warning).not_to_contain_text("scholar")  # granted by the invitation: keeps access
    page.select_option("#id_annotators", [])
    expect(warning).to_be_hidden()

    page.select_option("#id_annotators", str(named.pk))
    page.get_by_role("button", name="Save").first.click()
    expect(page.locator(".messages")).to_contain_text("Refused from now on: reader (2 judged).")
    expect(page.locator("#access-summary")).to_contain_text("Only these annotators may work on the study: named")


def test_a_crowd_link_opened_in_a_staff_browser_asks_before_switching_accounts(page):
    study = make_relic_proxy_study(3)
    link = configure_crowd_link(study, completion_code="CC-1", quota=2)
    make_user("curator", staff=True)
    sign_in(page, "curator")
    entry = f"/crowd/{link.slug}/?PROLIFIC_PID=5f0c1a2b3c&STUDY_ID=prolific-study&SESSION_ID=session-1"

    page.goto(entry)
    expect(page.locator("#crowd-confirm")).to_be_visible()
    expect(page.locator("#signed-in-as")).to_have_text("curator")
    page.goto("/dashboard/")  # the GET changed nothing: still staff
    expect(page.locator(".who")).to_have_text("curator")
    assert not Participant.objects.exists()

    page.goto(entry)
    page.get_by_role("button", name="Sign out and take part").click()
    expect(page.locator("#progress-text")).to_have_text("0 / 2")
    participant = Participant.objects.get()
    expect(page.locator(".who")).to_have_text(participant.user.username)
    assert participant.user.username.startswith("Participant-") and "5f0c1a2b3c" not in page.content()
