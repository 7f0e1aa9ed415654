"""Preference items in a real Chromium, answered with the keyboard only: a pair (1 / 2 the better
passage, t a tie, b both bad) and a list (rank keys per passage, the next passage following, Tab
back and forth, equal ranks a tie, b "none is good"). What the page stores is checked against
the order the candidates were shown in."""

import pytest
from playwright.sync_api import expect

from annotation.models import Item, Judgment
from tests.browser.conftest import sign_in
from tests.factories import make_annotator, make_preference_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def progress(page):
    return page.locator("#progress-text")


def shown_item(page) -> Item:
    return Item.objects.get(pk=int(page.locator("#judgment-form input[name=item]").input_value()))


def shown_texts(page) -> list[str]:
    return [
        text.strip()
        for text in page.locator("#judgment-form .candidate-text, #judgment-form .passage-text").all_inner_texts()
    ]


def stored_texts(item: Item) -> list[str]:
    return list(item.candidates.order_by("position").values_list("passage__text", flat=True))


def test_pairs_are_answered_with_1_2_t_and_b(page):
    annotator = make_annotator("ranker")
    study = make_preference_study(n_queries=1, n_passages=3, design="all-pairs", judgments_per_item=1)
    sign_in(page, "ranker")
    page.goto(f"/annotate/{study.pk}/")
    expect(progress(page)).to_have_text("0 / 3")
    expect(page.locator(".keys")).to_contain_text("1 / 2")
    expect(page.locator(".keys")).to_contain_text("tie")
    expect(page.locator(".keys")).to_contain_text("both bad")
    item = shown_item(page)
    assert shown_texts(page) == stored_texts(item)  # the page shows the stored display order

    # Enter with nothing chosen says so and stores nothing.
    page.keyboard.press("Enter")
    expect(page.locator(".form-problem")).to_contain_text("Choose the better passage")
    assert not Judgment.objects.exists()
    page.keyboard.press("2")
    expect(page.locator("input[name=preference][value='1']")).to_be_checked()
    page.screenshot(path="/tmp/preference-pair.png", full_page=True)
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 3")
    first = Judgment.objects.get(item=item)
    assert first.label["order"] == [[1], [0]] and first.choice.position == 1
    assert first.label["shown"] == list(item.candidates.order_by("position").values_list("pk", flat=True))

    tie_item = shown_item(page)
    page.keyboard.press("t")
    expect(page.locator("input[name=preference][value='tie']")).to_be_checked()
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("2 / 3")
    assert Judgment.objects.get(item=tie_item).label["order"] == [[0, 1]]

    bad_item = shown_item(page)
    page.keyboard.press("b")
    page.keyboard.press("Enter")
    expect(page.locator("#study-finished")).to_be_visible()
    assert Judgment.objects.get(item=bad_item).label["both_bad"] is True
    assert Judgment.objects.filter(annotator=annotator).count() == 3


def test_a_list_is_ranked_with_rank_keys_ties_included_and_b_for_none_good(page):
    make_annotator("ranker")
    study = make_preference_study(
        n_queries=1,
        n_passages=6,
        design="random",
        budget=2,
        judgments_per_item=1,
        label_schema={"shape": "listwise", "list_size": 4},
    )
    sign_in(page, "ranker")
    page.goto(f"/annotate/{study.pk}/")
    item = shown_item(page)
    assert shown_texts(page) == stored_texts(item)
    expect(page.locator("fieldset.place-field")).to_have_count(4)
    expect(page.locator("fieldset.active legend")).to_have_text("Passage 1")

    # 2, 1, 2: each key ranks the active passage and moves to the next one.
    for key in ("2", "1", "2"):
        page.keyboard.press(key)
    expect(page.locator("fieldset.active legend")).to_have_text("Passage 4")
    page.keyboard.press("Enter")  # the fourth has no rank yet
    expect(page.locator(".form-problem")).to_contain_text("Give passage 4 a rank")
    assert not Judgment.objects.exists()
    # Shift+Tab goes back: passage 3 becomes 3rd, then Tab forward to passage 4.
    page.keyboard.press("Shift+Tab")
    expect(page.locator("fieldset.active legend")).to_have_text("Passage 3")
    page.keyboard.press("3")
    page.keyboard.press("4")
    expect(page.locator("input[name=rank-3][value='4']")).to_be_checked()
    page.screenshot(path="/tmp/preference-list.png", full_page=True)
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 2")
    assert Judgment.objects.get(item=item).label["order"] == [[1], [0], [2], [3]]

    # A tie: two passages given the same rank.
    tied = shown_item(page)
    for key in ("1", "1", "3", "4"):
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    expect(page.locator("#study-finished")).to_be_visible()
    judgment = Judgment.objects.get(item=tied)
    assert judgment.label["order"] == [[0, 1], [2], [3]] and judgment.choice is None


def test_none_good_needs_no_ranks_and_a_strict_list_refuses_equal_ranks(page):
    make_annotator("ranker")
    study = make_preference_study(
        n_queries=1,
        n_passages=6,
        design="random",
        budget=2,
        judgments_per_item=1,
        label_schema={"shape": "listwise", "list_size": 3, "ties": False},
    )
    sign_in(page, "ranker")
    page.goto(f"/annotate/{study.pk}/")
    first = shown_item(page)
    for key in ("1", "1", "2"):
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    expect(page.locator(".form-problem")).to_contain_text("no ties")
    assert not Judgment.objects.exists()
    page.keyboard.press("b")
    expect(page.locator("#preference-none-good")).to_be_checked()
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 2")
    assert Judgment.objects.get(item=first).label["both_bad"] is True
