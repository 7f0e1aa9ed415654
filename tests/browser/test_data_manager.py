"""The data manager and answer revisions in a real Chromium: staff filter a study's items, open
one, void a judgment, send two items back to the queue and export the selection; an annotator
revises an earlier answer from the keyboard. axe-core finds no serious or critical violation on
any of these pages, and Tab reaches every control of each."""

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import Judgment, JudgmentRevision, Rework, Study
from annotation.services import claim_next_item, submit_judgment
from tests.browser.accessibility import blocking_violations, unreachable_by_tab
from tests.browser.conftest import sign_in
from tests.factories import gold_position, make_annotator, make_relic_proxy_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def assert_accessible(page) -> None:
    """No serious or critical axe-core violation on the page as it stands, and every control of
    it reachable with Tab (tests/browser/accessibility.py, shared with the other pages' tests)."""
    assert blocking_violations(page) == []
    assert unreachable_by_tab(page) == {}


def judged_study():
    """Six items judged by three annotators through the queue: ada always takes the gold, ben
    the option after it, cai the gold on even items only; so items split or agree."""
    study = make_relic_proxy_study(6, judgments_per_item=3, name="pilot")
    Study.objects.filter(pk=study.pk).update(allow_revisions=True)
    people = [make_annotator(name) for name in ("ada", "ben", "cai")]
    for person in people:
        while (claim := claim_next_item(study, person)) is not None:
            gold = gold_position(claim.item_id)
            choice = {
                "ada": gold,
                "ben": (gold + 1) % 3,
                "cai": gold if claim.item.position % 2 == 0 else (gold + 2) % 3,
            }[person.username]
            submit_judgment(annotator=person, item=claim.item, position=choice, seconds=9)
    return study


def test_staff_filter_open_void_send_back_and_export(page):
    make_user("curator", staff=True)
    study = judged_study()
    sign_in(page, "curator")
    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Data manager").click()
    expect(page.locator("h1")).to_have_text("Items of pilot")
    assert_accessible(page)

    page.get_by_label("Agreement").select_option("split")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#items h2")).to_have_text("3 items matching the filter")  # the even items
    expect(page.locator("table.data-table tbody tr")).to_have_count(3)

    first = page.locator("table.data-table tbody tr").first
    first.get_by_role("link").click()
    expect(page.locator("h1")).to_contain_text("Item 1 of pilot")
    expect(page.locator("article.judgment-entry")).to_have_count(3)
    assert_accessible(page)
    page.get_by_label("Reason to void ben's judgment").fill("always the next option")
    page.get_by_label("Reason to void ben's judgment").press("Enter")
    expect(page.locator("ul.messages")).to_contain_text("voided; its slot is open again")
    voided = Judgment.objects.get(item__study=study, item__position=0, annotator__username="ben")
    assert voided.voided and voided.void_reason == "always the next option"

    page.get_by_role("link", name="All items").click()
    rows = page.locator("table.data-table tbody tr")
    rows.nth(1).get_by_role("checkbox").check()
    rows.nth(2).get_by_role("checkbox").check()
    expect(page.locator("#selected-count")).to_have_text("2 chosen on this page")
    page.get_by_label("Reason (kept with each judgment)").fill("guidelines changed")
    page.get_by_role("button", name="Send back to the queue").click()
    expect(page.locator("ul.messages")).to_contain_text("2 items sent back to the queue: 6 judgments voided")
    reworks = Rework.objects.filter(item__study=study)
    assert sorted(reworks.values_list("item__position", "reason")) == [
        (1, "guidelines changed"),
        (2, "guidelines changed"),
    ]
    assert sorted(judgment for judgments in reworks.values_list("judgments", flat=True) for judgment in judgments) == (
        sorted(Judgment.objects.filter(item__position__in=[1, 2], item__study=study).values_list("pk", flat=True))
    )

    page.get_by_label("Agreement").select_option("")
    page.get_by_label("Status").select_option("complete")
    page.get_by_role("button", name="Apply").click()
    rows = page.locator("table.data-table tbody tr")
    expect(rows).to_have_count(3)  # positions 3, 4, 5: the others lost judgments
    rows.nth(0).get_by_role("checkbox").check()
    rows.nth(1).get_by_role("checkbox").check()
    page.get_by_label("Format").select_option("jsonl")
    with page.expect_download() as download:
        page.get_by_role("button", name="Export").click()
    exported = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert len(exported) == 6 and {row["annotator"] for row in exported} == {"ada", "ben", "cai"}
    assert {row["item"] for row in exported} == set(
        study.items.filter(position__in=[3, 4]).values_list("pk", flat=True)
    )
    assert all(row["revision"] == 1 for row in exported)


def test_an_annotator_revises_an_earlier_answer_with_the_keyboard(page):
    study = judged_study()
    ada = Judgment.objects.filter(item__study=study, annotator__username="ada").order_by("submitted_at").first()
    sign_in(page, "ada")
    page.get_by_role("link", name="Your answers").click()
    expect(page.locator("h1")).to_have_text("Your answers in pilot")
    expect(page.locator("#my-answers tbody tr")).to_have_count(6)
    assert_accessible(page)

    page.locator(f'tr[data-item="{ada.item_id}"]').get_by_role("link", name="Revise").click()
    expect(page.locator("h1")).to_have_text("Revise your answer")
    assert_accessible(page)
    chosen = page.locator("input[name=choice]:checked")
    expect(chosen).to_have_value(str(ada.choice.position))
    other = (ada.choice.position + 1) % 3
    chosen.focus()
    page.keyboard.press("ArrowDown")  # arrows move the choice to the next option (the last wraps to the first)
    expect(page.locator("input[name=choice]:checked")).to_have_value(str(other))
    page.keyboard.press("Enter")
    expect(page.locator("ul.messages")).to_contain_text("Your answer was revised (answer 2)")
    ada.refresh_from_db()
    assert (ada.choice.position, ada.revision) == (other, 2)
    earlier = JudgmentRevision.objects.get(judgment=ada)
    assert earlier.choice.position != other and earlier.replaced_by.username == "ada"
    expect(page.locator(f'tr[data-item="{ada.item_id}"]')).to_contain_text("revised 1 time")
