"""Relevance, quotability and 20-way proxy items in a real Chromium, answered the way annotators
do: keys for labels, rubric fields and paragraphs, the mouse to select a span and a key to mark
it. What the page stores is checked against the stored texts: a span's offsets must count the
characters of the passage as stored, not of the page's HTML."""

import pytest
from playwright.sync_api import expect

from annotation.models import Item, ItemCandidate, Judgment
from tests.browser.conftest import sign_in
from tests.factories import (
    make_annotator,
    make_plot_relevance_study,
    make_relic_collection,
    make_relic_proxy_study,
    make_speech_quotability_study,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUBRIC = [
    {"name": "specificity", "values": [0, 1], "labels": {"0": "broad", "1": "specific"}},
    {"name": "quality", "values": [0, 1, 2], "labels": {"0": "discard", "1": "acceptable", "2": "good"}},
]


def progress(page):
    return page.locator("#progress-text")


def shown_item(page) -> Item:
    return Item.objects.get(pk=int(page.locator("#judgment-form input[name=item]").input_value()))


def shown_passage_text(item: Item) -> str:
    return ItemCandidate.objects.select_related("passage").get(item=item, position=0).passage.text


def drag_select(page, selector: str, start: int, end: int) -> None:
    """Select characters [start, end) of the element's text with a real mouse drag: press just
    inside the first character and release just inside the last one."""
    box = page.locator(selector).evaluate(
        """(element, [start, end]) => {
            const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
            const points = [];
            let seen = 0;
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                for (const [wanted, edge] of [[start, "left"], [end - 1, "right"]]) {
                    if (wanted >= seen && wanted < seen + node.length) {
                        const range = document.createRange();
                        range.setStart(node, wanted - seen);
                        range.setEnd(node, wanted - seen + 1);
                        const rect = range.getBoundingClientRect();
                        const x = edge === "left" ? rect.left + 1 : rect.right - 1;
                        points.push({edge, x, y: rect.top + rect.height / 2});
                    }
                }
                seen += node.length;
            }
            const first = points.find(point => point.edge === "left");
            const last = points.find(point => point.edge === "right");
            return {x1: first.x, y1: first.y, x2: last.x, y2: last.y};
        }""",
        [start, end],
    )
    page.mouse.move(box["x1"], box["y1"])
    page.mouse.down()
    page.mouse.move((box["x1"] + box["x2"]) / 2, (box["y1"] + box["y2"]) / 2, steps=4)
    page.mouse.move(box["x2"], box["y2"], steps=4)
    page.mouse.up()


def phrase_in_shown_passage(page, phrases: tuple[str, ...]) -> tuple[Item, str, int]:
    """The item shown, the first of `phrases` its passage contains, and where it starts."""
    item = shown_item(page)
    text = shown_passage_text(item)
    phrase = next(p for p in phrases if p in text)
    return item, phrase, text.index(phrase)


# One phrase of each PLOT_PASSAGE (the first one spans the passage's line break and its "&").
PLOT_PHRASES = (
    "in the piano.\nLater that night he burns it & watches",
    "the <bridge> is repaired",
    "saw the maid",
    "under another name",
)


def test_a_relevance_item_is_answered_with_a_span_a_rubric_and_a_rationale(page):
    annotator = make_annotator("reader")
    study = make_plot_relevance_study(
        label_schema={"scale": "0-10", "spans": "passage", "rubric": RUBRIC, "rationale": "optional"}
    )
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    expect(progress(page)).to_have_text("0 / 4")
    expect(page.locator(".keys")).to_contain_text("0-9, t for 10")
    expect(page.locator("input[name=label]")).to_have_count(11)
    page.screenshot(path="/tmp/relevance-empty.png", full_page=True)

    # 10, the top of the scale, has a key of its own.
    page.keyboard.press("t")
    expect(page.locator("input[name=label][value='10']")).to_be_checked()

    # A span: drag over the phrase, press m; a second one marked and removed again.
    item, phrase, start = phrase_in_shown_passage(page, PLOT_PHRASES)
    drag_select(page, "[data-span-target=passage]", start, start + len(phrase))
    page.keyboard.press("m")
    expect(page.locator("mark.span-mark")).to_have_text(phrase)
    drag_select(page, "[data-span-target=passage]", 0, 3)
    page.get_by_role("button", name="Mark selected text").click()
    expect(page.locator("mark.span-mark")).to_have_count(2)
    page.locator(".span-chip").first.get_by_role("button", name="Remove this span").click()
    expect(page.locator("mark.span-mark")).to_have_count(1)
    expect(page.locator("mark.span-mark")).to_have_text(phrase)
    # The highlight only wraps the text: the element still holds the passage exactly.
    assert page.locator("[data-span-target=passage]").evaluate("e => e.textContent") == shown_passage_text(item)

    # Enter before the rubric is answered says what is missing, stores nothing, and makes the
    # missing field the active one: its keys answer it.
    page.keyboard.press("Enter")
    expect(page.locator(".form-problem")).to_contain_text("Specificity")
    expect(page.locator("fieldset.active legend")).to_have_text("Specificity")
    assert not Judgment.objects.exists()
    page.keyboard.press("1")

    # Tab walks the fields (the scale, each rubric field), then into the rationale; Ctrl+Enter
    # submits from there.
    page.keyboard.press("Tab")
    page.keyboard.press("2")
    expect(page.locator("input[name=rubric-quality][value='2']")).to_be_checked()
    expect(page.locator("input[name=rubric-specificity][value='1']")).to_be_checked()
    page.mouse.move(0, 0)  # off the highlight, which turns red under the pointer (click removes)
    page.screenshot(path="/tmp/relevance.png", full_page=True)
    page.keyboard.press("Tab")
    expect(page.locator("#id_rationale")).to_be_focused()
    page.keyboard.type("The letter is burnt.")
    page.keyboard.press("Enter")  # a new line in the rationale, not a submission
    page.keyboard.type("Done.")
    page.keyboard.press("Control+Enter")
    expect(progress(page)).to_have_text("1 / 4")

    judgment = Judgment.objects.get(annotator=annotator)
    assert judgment.item == item and judgment.label == 10
    assert judgment.spans == [{"target": "passage", "start": start, "end": start + len(phrase)}]
    stored = shown_passage_text(item)
    assert stored[judgment.spans[0]["start"] : judgment.spans[0]["end"]] == phrase
    assert judgment.rubric == {"specificity": 1, "quality": 2}
    assert judgment.rationale == "The letter is burnt.\nDone."

    # The next item starts clean: no spans, nothing checked; spans and rationale are optional.
    expect(page.locator("mark.span-mark")).to_have_count(0)
    page.keyboard.press("3")
    page.keyboard.press("Tab")
    page.keyboard.press("0")
    page.keyboard.press("Tab")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("2 / 4")
    second = Judgment.objects.exclude(pk=judgment.pk).get(annotator=annotator)
    assert (second.label, second.spans, second.rubric, second.rationale) == (
        3,
        [],
        {"specificity": 0, "quality": 1},
        "",
    )


def test_a_span_on_the_query_counts_the_characters_of_the_query_as_shown(page):
    annotator = make_annotator("reader")
    study = make_plot_relevance_study(label_schema={"scale": "graded-0-2", "spans": "query", "spans_required": True})
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    item = shown_item(page)
    query_text = item.query.text
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    expect(page.locator(".form-problem")).to_contain_text("Mark at least one span")

    phrase = query_text.split(" ", 2)[1]  # the second word
    start = query_text.index(phrase)
    drag_select(page, "[data-span-target=query]", start, start + len(phrase))
    page.keyboard.press("m")
    expect(page.locator("mark.span-mark")).to_have_text(phrase)
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 4")
    judgment = Judgment.objects.get(annotator=annotator)
    assert (judgment.label, judgment.spans) == (2, [{"target": "query", "start": start, "end": start + len(phrase)}])


def test_quotability_yes_no_with_an_excerpt_span_then_the_multi_select_pilot(page):
    annotator = make_annotator("journalist")
    study = make_speech_quotability_study(label_schema={"spans": "passage"})
    sign_in(page, "journalist")
    page.goto(f"/annotate/{study.pk}/")
    expect(page.locator(".article-title")).to_have_text("Harbour plan divides the council")
    expect(page.locator(".label-query")).to_contain_text("Critics say the costs have doubled")
    expect(page.locator("legend")).to_contain_text(
        "Does this paragraph contain an excerpt that would be appropriate to quote in the next sentence?"
    )
    expect(page.locator(".keys")).to_contain_text("n / y")

    first = shown_item(page)
    page.keyboard.press("n")
    expect(page.locator("input[name=label][value='0']")).to_be_checked()
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 2")

    second = shown_item(page)
    text = shown_passage_text(second)
    excerpt = text.split(" ", 1)[1].rstrip(".")
    start = text.index(excerpt)
    page.keyboard.press("y")
    drag_select(page, "[data-span-target=passage]", start, start + len(excerpt))
    page.keyboard.press("m")
    expect(page.locator("mark.span-mark")).to_have_text(excerpt)
    page.mouse.move(0, 0)
    page.screenshot(path="/tmp/quotability.png", full_page=True)
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("2 / 2")
    answers = {j.item_id: j for j in Judgment.objects.filter(annotator=annotator)}
    assert (answers[first.pk].label, answers[first.pk].spans) == (0, [])
    assert answers[second.pk].label == 1
    assert answers[second.pk].spans == [{"target": "passage", "start": start, "end": start + len(excerpt)}]

    pilot = make_speech_quotability_study(multi_select=True)
    page.goto(f"/annotate/{pilot.pk}/")
    boxes = page.locator("input[name=selections]")
    expect(boxes).to_have_count(3)
    expect(page.locator(".keys")).to_contain_text("1-3")
    page.keyboard.press("1")
    page.keyboard.press("3")
    page.keyboard.press("3")  # pressed again: unselected
    page.keyboard.press("2")
    expect(boxes.nth(0)).to_be_checked()
    expect(boxes.nth(1)).to_be_checked()
    expect(boxes.nth(2)).not_to_be_checked()
    page.screenshot(path="/tmp/quotability-pilot.png", full_page=True)
    page.keyboard.press("Enter")
    expect(page.locator("#study-finished")).to_contain_text("You have finished this study.")
    assert Judgment.objects.get(annotator=annotator, item__study=pilot).selections == [0, 1]


def test_a_20_way_proxy_item_is_answered_by_keyboard_alone(page):
    annotator = make_annotator("reader")
    collection = make_relic_collection(2, book_sentences=80)
    study = make_relic_proxy_study(2, collection=collection, candidates=20)
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    choices = page.locator("input[name=choice]")
    expect(choices).to_have_count(20)
    expect(page.locator(".keys")).to_contain_text("1-9, 0 for 10, a-j for 11-20")
    page.keyboard.press("j")
    expect(choices.nth(19)).to_be_checked()
    page.keyboard.press("ArrowDown")  # wraps to the first
    expect(choices.nth(0)).to_be_checked()
    page.keyboard.press("0")
    expect(choices.nth(9)).to_be_checked()
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 2")
    page.keyboard.press("e")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("2 / 2")
    positions = [j.choice.position for j in Judgment.objects.filter(annotator=annotator).order_by("submitted_at")]
    assert positions == [9, 13]
