"""Quality control as annotators and staff meet it in a real Chromium: the qualification round
that gates formal work (fail, try again, pass), and an annotator blocked by staff from the
study's quality page who then gets no more work."""

import pytest
from playwright.sync_api import expect

from annotation.models import Item, Judgment, QualificationAnswer, Study
from annotation.selectors import counted_judgments
from tests.browser.conftest import sign_in
from tests.factories import make_annotator, make_plot_relevance_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def with_qualification_round(study: Study, *, questions: int, threshold: float, attempts: int) -> list[Item]:
    """Turn the study's first `questions` items into qualification questions whose known
    answers alternate 1, 0, 1, ...; the rest stay formal work."""
    Study.objects.filter(pk=study.pk).update(qualification_threshold=threshold, qualification_attempts=attempts)
    chosen = list(study.items.order_by("position")[:questions])
    for index, item in enumerate(chosen):
        Item.objects.filter(pk=item.pk).update(role=Item.Role.QUALIFICATION, expected_label=1 - index % 2)
    return chosen


def answer_question(page, *, correctly: bool) -> None:
    item = Item.objects.get(pk=int(page.locator("#judgment-form input[name=item]").input_value()))
    label = item.expected_label if correctly else 1 - item.expected_label
    page.keyboard.press(str(label))
    page.keyboard.press("Enter")


def test_the_qualification_round_gates_formal_work_fail_try_again_pass(page):
    annotator = make_annotator("newcomer")
    study = make_plot_relevance_study()
    with_qualification_round(study, questions=2, threshold=1.0, attempts=2)
    sign_in(page, "newcomer")
    page.goto(f"/annotate/{study.pk}/")
    banner = page.locator("#qualification-banner")
    expect(banner).to_have_text("Qualification round — attempt 1 of 2 · question 1 of 2")
    expect(page.locator("#progress-text")).to_have_text("0 / 2")

    answer_question(page, correctly=True)
    expect(banner).to_have_text("Qualification round — attempt 1 of 2 · question 2 of 2")
    answer_question(page, correctly=False)

    result = page.locator("#qualification-result")
    expect(result).to_contain_text("attempt 1 of 2: not passed")
    expect(result).to_contain_text("1 of 2 questions correctly; 100 % are needed")
    expect(result).to_contain_text("You have 1 more attempt.")
    expect(page.locator("ul.messages")).to_contain_text("You did not pass qualification attempt 1 (1 of 2 correct).")
    # Coming back later shows the same result; nothing starts until they ask.
    page.reload()
    expect(result).to_contain_text("attempt 1 of 2: not passed")

    with page.expect_navigation():  # a plain form post: the next page loads with its script
        page.get_by_role("button", name="Try again").click()
    expect(banner).to_have_text("Qualification round — attempt 2 of 2 · question 1 of 2")
    answer_question(page, correctly=True)
    expect(banner).to_have_text("Qualification round — attempt 2 of 2 · question 2 of 2")
    answer_question(page, correctly=True)

    expect(page.locator("ul.messages")).to_contain_text(
        "You passed the qualification round (2 of 2 correct). Formal work starts now."
    )
    expect(banner).to_have_count(0)
    formal = Item.objects.get(pk=int(page.locator("#judgment-form input[name=item]").input_value()))
    assert formal.role == Item.Role.WORK
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#progress-text")).to_have_text("1 / 2")

    assert QualificationAnswer.objects.filter(attempt__annotator=annotator).count() == 4
    assert list(Judgment.objects.filter(annotator=annotator).values_list("item", flat=True)) == [formal.pk]


def test_an_annotator_blocked_on_the_quality_page_gets_no_more_work(page, browser, live_server):
    annotator = make_annotator("drifter")
    make_user("organiser", staff=True)
    study = make_plot_relevance_study()
    sign_in(page, "drifter")
    page.goto(f"/annotate/{study.pk}/")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#progress-text")).to_have_text("1 / 4")

    staff = browser.new_context(base_url=live_server.url).new_page()
    sign_in(staff, "organiser")
    staff.goto(f"/studies/{study.pk}/quality/")
    row = staff.locator("tr[data-annotator=drifter]")
    expect(row).to_contain_text("1")
    row.get_by_role("button", name="Block").click()  # no reason: the browser refuses to send it
    expect(row).not_to_have_class("blocked")
    row.get_by_placeholder("Reason (required)").fill("answers without reading")
    row.get_by_role("button", name="Block").click()
    expect(staff.locator("ul.messages")).to_contain_text("drifter is blocked from this study.")
    expect(staff.locator("tr[data-annotator=drifter]")).to_contain_text("Blocked by organiser: answers without reading")
    staff.context.close()

    # The item the annotator had open is gone; answering it is refused with the reason.
    page.keyboard.press("0")
    page.keyboard.press("Enter")
    expect(page.locator(".refused")).to_contain_text("You cannot work on this study: you are blocked from this study.")
    page.goto(f"/annotate/{study.pk}/")
    expect(page.locator(".refused")).to_contain_text("you are blocked from this study")
    page.goto("/")
    expect(page.locator(f'[data-study="{study.pk}"]')).to_contain_text("You cannot work on this study")
    expect(page.get_by_role("link", name="Continue")).to_have_count(0)
    assert page.request.get(f"/api/annotate/{study.pk}/next/").status == 403
    assert Judgment.objects.filter(annotator=annotator).count() == 1
    assert not counted_judgments(study).filter(annotator=annotator).exists()
