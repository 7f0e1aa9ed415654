"""The annotation interface in a real Chromium: answering with the keyboard only, resuming after
a reload, the end of a study, nothing on the page or in the API that gives the answer away, and
a staff member creating a study through the form."""

import json
import re

import pytest
from django.utils.html import escape
from playwright.sync_api import expect

from annotation.models import ItemCandidate, Judgment, Study
from tests.browser.conftest import sign_in
from tests.factories import (
    make_annotator,
    make_neighbour_run,
    make_relic_collection,
    make_relic_proxy_study,
    make_user,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Words that would only be on the page if it described where a candidate came from or which is right.
GIVEAWAY_WORDS = re.compile(
    r"\b(gold|is_gold|source|source_run|source_rank|rank|bm25|dense|external_id|provenance)\b", re.IGNORECASE
)
GIVEAWAY_KEYS = {
    "gold",
    "is_gold",
    "source",
    "source_run",
    "source_rank",
    "rank",
    "run",
    "passage",
    "external_id",
    "score",
    "sources",
    "judgments",
    "answers",
}
CANDIDATE_LI = re.compile(r'<li class="candidate">.*?</li>', re.DOTALL)


def progress(page):
    return page.locator("#progress-text")


def shown_item_id(page) -> int:
    return int(page.locator("#judgment-form input[name=item]").input_value())


def answer_with_keys(page, *keys: str, done_after: str) -> None:
    for key in keys:
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text(done_after)


def test_an_annotator_answers_with_the_keyboard_and_resumes_after_a_reload(page):
    annotator = make_annotator("reader")
    study = make_relic_proxy_study(5, guidelines="Choose the sentence the critic quoted.")
    sign_in(page, "reader")
    page.get_by_role("link", name="Start").click()
    expect(progress(page)).to_have_text("0 / 5")
    expect(page.locator("mark.slot")).to_have_text("[masked quote]")

    # The timer is visible and running before the first answer.
    expect(page.locator("#timer")).to_have_text(re.compile(r"^0:0[1-9]$"))
    first_item = shown_item_id(page)
    page.evaluate("window.loadedOnce = true")
    page.keyboard.press("2")
    expect(page.locator("input[name=choice]").nth(1)).to_be_checked()
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 5")
    assert shown_item_id(page) != first_item
    # The script submitted in place: the next item arrived without a page load.
    assert page.evaluate("window.loadedOnce") is True

    # Arrow keys move the selection (wrapping around): four steps down from none is option 1.
    answer_with_keys(page, "ArrowDown", "ArrowDown", "ArrowDown", "ArrowDown", done_after="2 / 5")
    answer_with_keys(page, "3", done_after="3 / 5")

    # Leaving and coming back shows the same claimed item, and its clock goes on from where it was.
    current = shown_item_id(page)
    expect(page.locator("#timer")).to_have_text(re.compile(r"^0:0[1-9]$"))
    page.reload()
    expect(progress(page)).to_have_text("3 / 5")
    assert shown_item_id(page) == current
    assert page.locator("#timer").text_content() != "0:00"

    judgments = list(Judgment.objects.filter(annotator=annotator).order_by("submitted_at").select_related("choice"))
    assert [j.choice.position for j in judgments] == [1, 0, 2]
    assert all(j.seconds is not None and j.source == Judgment.Source.WEB for j in judgments)
    assert judgments[0].item_id == first_item and judgments[0].seconds >= 1.0
    assert all(j.item.study_id == study.pk for j in judgments)


def test_with_more_than_nine_candidates_0_and_letters_pick_the_later_ones(page):
    annotator = make_annotator("reader")
    collection = make_relic_collection(1, book_sentences=60)
    study = make_relic_proxy_study(1, collection=collection, candidates=12)
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    expect(page.locator(".keys")).to_contain_text("1-9, 0 for 10, a-b for 11-12")
    choices = page.locator("input[name=choice]")
    page.keyboard.press("0")
    expect(choices.nth(9)).to_be_checked()
    page.keyboard.press("b")
    expect(choices.nth(11)).to_be_checked()
    page.keyboard.press("ArrowDown")
    expect(choices.nth(0)).to_be_checked()
    page.keyboard.press("ArrowUp")
    answer_with_keys(page, done_after="1 / 1")
    assert Judgment.objects.get(annotator=annotator).choice.position == 11


def normalised_candidate(markup: str, text: str) -> str:
    """A candidate's markup with what legitimately differs between options (its text, its
    position value, its key) replaced by placeholders."""
    markup = markup.replace(escape(text), "TEXT").replace(text, "TEXT")
    markup = re.sub(r'value="\d+"', 'value="N"', markup)
    markup = re.sub(r'data-key="\w"', 'data-key="K"', markup)
    return re.sub(r">\w</kbd>", ">K</kbd>", markup)


def keys_in(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for inner in value.values() for key in keys_in(inner)}
    if isinstance(value, list):
        return {key for inner in value for key in keys_in(inner)}
    return set()


def test_nothing_shown_to_the_annotator_tells_the_gold_or_where_candidates_came_from(page):
    make_annotator("reader")
    study = make_relic_proxy_study(4)
    secrets = (
        set(ItemCandidate.objects.filter(item__study=study).values_list("passage__external_id", flat=True))
        | set(study.items.values_list("query__external_id", flat=True))
        | {
            study.negatives_run.tag,
            study.negatives_run.retriever.name,
        }
    )
    sign_in(page, "reader")
    script = page.request.get("/static/annotation/annotate.js")
    assert script.ok
    for answered in range(3):
        response = page.goto(f"/annotate/{study.pk}/")
        html = response.text()
        api = page.request.get(f"/api/annotate/{study.pk}/next/")
        assert api.ok
        payload = api.json()
        item_id = shown_item_id(page)
        assert payload["item"] == item_id

        # The gold's markup and a negative's are the same but for their text, number and key,
        # in the server's HTML and in the page as the script left it.
        candidates = list(ItemCandidate.objects.filter(item_id=item_id).select_related("passage").order_by("position"))
        gold = next(c for c in candidates if c.is_gold)
        negative = next(c for c in candidates if not c.is_gold)
        served = CANDIDATE_LI.findall(html)
        rendered = page.locator("li.candidate").evaluate_all("items => items.map(item => item.outerHTML)")
        for markup in (served, rendered):
            assert len(markup) == len(candidates) == 3
            assert normalised_candidate(markup[gold.position], gold.passage.text) == normalised_candidate(
                markup[negative.position], negative.passage.text
            )
            assert len({normalised_candidate(m, c.passage.text) for m, c in zip(markup, candidates)}) == 1

        # Opaque ids only: the API's candidate ids follow the display order, whichever is the gold.
        assert [c["id"] for c in payload["candidates"]] == [c.pk for c in candidates]
        assert not keys_in(payload) & GIVEAWAY_KEYS

        body = json.dumps(payload)
        for text in (html, page.content(), script.text(), body):
            assert not GIVEAWAY_WORDS.search(text), GIVEAWAY_WORDS.search(text)
            for secret in secrets:
                assert not re.search(rf"(?<![\w:]){re.escape(secret)}(?![\w:])", text), secret

        answer_with_keys(page, "1", done_after=f"{answered + 1} / 4")


def test_a_finished_study_says_so(page):
    make_annotator("reader")
    study = make_relic_proxy_study(2)
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    answer_with_keys(page, "1", done_after="1 / 2")
    answer_with_keys(page, "2", done_after="2 / 2")
    expect(page.locator("#study-finished")).to_contain_text("You have finished this study.")
    expect(page.locator("#judgment-form")).to_have_count(0)
    page.reload()
    expect(page.locator("#study-finished")).to_contain_text("You judged all 2 items.")
    page.get_by_role("link", name="Back to your studies").click()
    expect(page.locator(f'[data-study="{study.pk}"]')).to_contain_text("Finished")


def test_staff_create_a_study_through_the_form(page):
    collection = make_relic_collection(4)
    run = make_neighbour_run(collection)
    make_user("organiser", staff=True)
    make_annotator("reader")
    sign_in(page, "organiser")
    page.get_by_role("link", name="New proxy study").first.click()

    page.fill("#id_name", "Browser-made study")
    page.select_option("#id_collection", label=collection.name)
    page.select_option("#id_negatives_run", value=str(run.pk))
    page.fill("#id_items", "3")
    page.fill("#id_candidates", "25")
    page.fill("#id_guidelines", "Choose the sentence the critic quoted.")
    page.get_by_label("reader").check()
    page.get_by_role("button", name="Create study").click()
    expect(page.locator(".field-candidates .field-error")).to_contain_text("less than or equal to 20")
    assert not Study.objects.exists()

    page.fill("#id_candidates", "3")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url(re.compile(r"/studies/\d+/$"))
    expect(page.locator("ul.messages")).to_contain_text("created with 3 items")
    study = Study.objects.get(name="Browser-made study")
    assert page.url.endswith(f"/studies/{study.pk}/")
    assert study.items.count() == 3 and study.negatives_run == run
    assert list(study.annotators.values_list("username", flat=True)) == ["reader"]
    expect(page.locator("table.items tbody tr")).to_have_count(3)
