"""Skip, flag, "unsure", undo and more context in a real Chromium, with the keyboard: an annotator
skips an item (never seen again), flags one with a reason staff then read, marks an answer
unsure, takes an answer back within the grace period and cannot after it."""

import re

import pytest
from playwright.sync_api import expect

from annotation.models import Assignment, ItemFlag, Judgment, Study
from tests.browser.conftest import sign_in
from tests.browser.test_annotation import progress, shown_item_id
from tests.factories import make_annotator, make_relic_proxy_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_annotator_skips_flags_marks_unsure_and_undoes_within_the_grace_period(page, settings):
    settings.MARGINALIA_UNDO_SECONDS = 30
    annotator = make_annotator("reader")
    study = make_relic_proxy_study(4, judgments_per_item=1)
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    expect(progress(page)).to_have_text("0 / 4")

    # s skips: another item comes, the skipped one is recorded and never comes back.
    skipped = shown_item_id(page)
    page.keyboard.press("s")
    expect(page.locator("ul.messages")).to_contain_text("Item skipped")
    flagged = shown_item_id(page)
    assert flagged != skipped
    assert Assignment.objects.get(item_id=skipped, annotator=annotator).state == Assignment.State.SKIPPED

    # r opens the flag box; Ctrl+Enter sends the reason; the item stays to be answered.
    page.keyboard.press("r")
    expect(page.locator("#id_flag_reason")).to_be_focused()
    page.keyboard.type("Two candidates are the same sentence.")
    page.keyboard.press("Control+Enter")
    expect(page.locator("ul.messages")).to_contain_text("Flag sent")
    assert shown_item_id(page) == flagged
    assert ItemFlag.objects.get().reason == "Two candidates are the same sentence."

    # u marks the answer unsure; Enter submits; z takes it back and the same item returns.
    page.keyboard.press("2")
    page.keyboard.press("u")
    expect(page.locator("input[name=unsure]")).to_be_checked()
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 4")
    assert Judgment.objects.get(annotator=annotator).unsure is True
    expect(page.locator("#undo-form")).to_be_visible()
    page.keyboard.press("z")
    expect(page.locator("ul.messages")).to_contain_text("taken back")
    expect(progress(page)).to_have_text("0 / 4")
    assert shown_item_id(page) == flagged
    assert not Judgment.objects.filter(annotator=annotator).exists()

    # Answered again, differently: the new answer is the one stored.
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 4")
    stored = Judgment.objects.get(annotator=annotator)
    assert stored.item_id == flagged and stored.choice.position == 2 and stored.unsure is False

    # Staff read the flag on the study page.
    staff = make_user("staffer", staff=True)
    staff_page = page.context.new_page()
    sign_in(staff_page, staff.username)
    staff_page.goto(f"/studies/{study.pk}/")
    expect(staff_page.locator("#item-flags")).to_contain_text("Two candidates are the same sentence.")
    expect(staff_page.locator("#item-flags")).to_contain_text("reader")


def test_after_the_grace_period_the_undo_bar_goes_and_the_answer_is_final(page, settings):
    settings.MARGINALIA_UNDO_SECONDS = 2
    annotator = make_annotator("reader")
    study = make_relic_proxy_study(3)
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 3")
    expect(page.locator("#undo-form")).to_be_visible()

    expect(page.locator("#undo-form")).to_be_hidden(timeout=5_000)
    page.keyboard.press("z")  # nothing to press any more
    # A stale tab that still posts the undo form is refused by the server.
    response = page.request.post(
        f"/annotate/{study.pk}/undo/",
        form={"csrfmiddlewaretoken": page.locator("input[name=csrfmiddlewaretoken]").first.input_value()},
    )
    assert re.search(r"Not undone: answers can be taken back only within 2 seconds", response.text())
    assert Judgment.objects.filter(annotator=annotator).count() == 1
    expect(progress(page)).to_have_text("1 / 3")


def test_more_context_shows_the_book_around_a_candidate_where_the_study_allows_it(page):
    make_annotator("reader")
    study = make_relic_proxy_study(2)
    Study.objects.filter(pk=study.pk).update(more_context=True)
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")

    page.locator(".more-context-toggle").first.click()

    box = page.locator(".more-context-text").first
    expect(box).to_be_visible()
    expect(box.locator("mark")).to_have_text(page.locator(".candidate-text").first.text_content())
    expect(box).to_contain_text("Sentence number")
    page.locator(".more-context-toggle").first.click()
    expect(box).to_be_hidden()
