"""The adjudication workspace in a real Chromium: an adjudicator who is not staff reaches the
queue and works it in order with the keyboard alone (Tab and Enter to get there, the workspace's
keys after), decides two items and sends one back for rework, steps back and forth, and the
exports staff download then mark each label adjudicated, sent back, unanimous or aggregated. The
queue and the workspace pass axe-core (no serious or critical violation) and Tab reaches every
control on both."""

import json
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from annotation.models import Adjudication, Judgment, Rework, Study
from tests.browser.accessibility import blocking_violations, tab_to, unreachable_by_tab
from tests.browser.conftest import sign_in
from tests.factories import add_label_item, add_label_judgment, grant, make_annotator, make_label_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Graded 0-2, three annotators; agreement = mean over pairs of 1 - |a - b| / 2.
LABELS = {
    "first": (0, 2, 2),  # 1/3: first in the queue
    "second": (0, 0, 2),  # 1/3: after it, in study order
    "third": (1, 2, 2),  # 2/3
    "fourth": (0, 1, 1),  # 2/3: left undecided, so aggregated (majority 1)
    "agreed": (2, 2, 2),  # unanimous: not in the queue
}


def closed_study():
    study = make_label_study(label_schema={"scale": "graded-0-2", "rationale": "optional"}, name="Harbour pool")
    people = [make_annotator(name) for name in ("ann-lee", "bo-chen", "cy-dunn")]
    study.annotators.set(people)
    items = {}
    for name, labels in LABELS.items():
        items[name] = add_label_item(study)
        for person, label in zip(people, labels):
            judgment = add_label_judgment(items[name], person, label, rationale=f"{person.username} on {name}")
            Judgment.objects.filter(pk=judgment.pk).update(seconds=12.5)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
    return study, items, people


def path_of(page) -> str:
    return urlparse(page.url).path


def test_an_adjudicator_works_the_queue_in_order_and_the_exports_mark_the_labels(page, browser, live_server):
    study, items, people = closed_study()
    grant(make_user("adele"), "annotation.adjudicate")
    make_user("organiser", staff=True)
    item_path = {name: f"/studies/{study.pk}/adjudicate/{item.pk}/" for name, item in items.items()}

    sign_in(page, "adele")
    tab_to(page, "e.textContent.trim() === 'Harbour pool'")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: urlparse(url).path == f"/studies/{study.pk}/adjudicate/")
    rows = page.locator("#queue-table tbody tr")
    expect(rows).to_have_count(4)
    assert [int(row.get_attribute("data-item")) for row in rows.all()] == [
        items[name].pk for name in ("first", "second", "third", "fourth")
    ]
    expect(page.locator("#undecided-count")).to_have_text("4")
    assert blocking_violations(page) == []
    assert unreachable_by_tab(page) == {}

    tab_to(page, "e.id === 'start-queue'")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: urlparse(url).path == item_path["first"])
    answers = page.locator("#answers")
    expect(answers.locator("th.annotator")).to_have_text(["A", "B", "C"])
    expect(answers).to_contain_text("0 · Not relevant")
    expect(answers).to_contain_text("ann-lee on first")  # the rationale, not the name alone
    expect(answers).to_contain_text("12.5")
    for person in people:
        expect(answers.locator("th.annotator")).not_to_contain_text([person.username])
    expect(page.locator("#queue-place")).to_have_text("1 / 4")
    assert blocking_violations(page) == []
    assert unreachable_by_tab(page) == {}
    page.evaluate("() => document.activeElement?.blur()")  # the walk ends where it ends: start afresh

    # First item: label 1 (its own key), the first reason (Shift+1), a note, Enter.
    page.keyboard.press("1")
    expect(page.locator("input[name=label][value='1']")).to_be_checked()
    page.keyboard.press("Shift+Digit1")
    expect(page.locator("input[name=reason][value='Guideline gap']")).to_be_checked()
    page.keyboard.press("/")
    page.keyboard.type("both readings are in the guidelines")
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: urlparse(url).path == item_path["second"])
    expect(page.locator("ul.messages")).to_contain_text("decided.")

    # Second item: sent back for rework with the second reason.
    page.keyboard.press("Shift+Digit2")
    page.keyboard.press("x")
    page.wait_for_url(lambda url: urlparse(url).path == item_path["third"])
    expect(page.locator("ul.messages")).to_contain_text("sent back for a fresh round of judgments")

    # Third item: a reason is required, so Enter alone is refused by the browser; then decided.
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    expect(page).to_have_url(live_server.url + item_path["third"])
    page.keyboard.press("Shift+Digit3")
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: urlparse(url).path == item_path["fourth"])

    # Back and forth along the queue: the third shows its decision; the fourth stays undecided.
    page.keyboard.press("[")
    page.wait_for_url(lambda url: urlparse(url).path == item_path["third"])
    expect(page.locator("#current-decision")).to_contain_text("2 · Highly relevant · Annotator error")
    page.keyboard.press("]")
    page.wait_for_url(lambda url: urlparse(url).path == item_path["fourth"])
    expect(page.locator("#current-decision")).to_have_text("undecided")

    decisions = {item.item_id: (item.label, item.reason, item.note) for item in Adjudication.objects.all()}
    assert decisions == {
        items["first"].pk: (1, "Guideline gap", "both readings are in the guidelines"),
        items["third"].pk: (2, "Annotator error", ""),
    }
    rework = Rework.objects.get()
    assert (rework.item_id, rework.reason) == (items["second"].pk, "Ambiguous item")
    assert Judgment.objects.filter(item=items["second"], voided=True).count() == 3

    # Staff download the exports: each label says where it comes from.
    staff = browser.new_context(base_url=live_server.url).new_page()
    sign_in(staff, "organiser")
    judgments = staff.request.get(f"/api/judgments/?study={study.pk}&format=jsonl").text()
    sources = {row["item"]: row["label_source"] for row in map(json.loads, judgments.splitlines())}
    assert sources == {
        items["first"].pk: "adjudicated",
        items["second"].pk: "sent_back",
        items["third"].pk: "adjudicated",
        items["fourth"].pk: "aggregated",
        items["agreed"].pk: "unanimous",
    }
    qrels = staff.request.get(f"/api/studies/{study.pk}/qrels/?provenance=1").text()
    by_passage = {row["corpus-id"]: row for row in map(json.loads, qrels.splitlines())}
    passage = {name: item.candidates.get().passage.external_id for name, item in items.items()}
    assert {name: by_passage[passage[name]]["label_source"] for name in ("first", "third", "fourth", "agreed")} == {
        "first": "adjudicated",
        "third": "adjudicated",
        "fourth": "aggregated",
        "agreed": "unanimous",
    }
    assert passage["second"] not in by_passage  # waits for its new round
    assert by_passage[passage["fourth"]]["label_method"] == "majority"
    staff.goto(f"/studies/{study.pk}/adjudicate/")
    expect(staff.locator(f'tr[data-item="{items["first"].pk}"]')).to_contain_text(
        "Decided: 1 · Partially relevant · Guideline gap"
    )
    staff.context.close()
