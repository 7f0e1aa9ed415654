"""The annotation pages by keyboard alone, in a real Chromium (issues 21.5 and 24.5): on each
kind of item Tab reaches the navigation, the guidelines, the answer's fields, Submit, Unsure,
Skip and Flag and Shift+Tab leaves them again (no trap); Esc leaves a text box, the marked text
and the list of shortcuts; spans are marked with keys only; `?` opens the list of shortcuts,
which holds the focus until Esc gives it back. After a skip the previous answer's undo bar is
gone; a study's own keys and auto-advance work as staff set them."""

import pytest
from playwright.sync_api import expect

from annotation.models import ItemCandidate, Judgment, PeerReview, Study
from annotation.services.presentation import apply_presentation
from tests.browser.accessibility import focused_text, tab_to
from tests.browser.conftest import sign_in
from tests.browser.test_annotation import progress, shown_item_id
from tests.browser.test_quality_gate import with_qualification_round
from tests.factories import (
    add_label_judgment,
    make_annotator,
    make_plot_relevance_study,
    make_relic_proxy_study,
    make_speech_quotability_study,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUBRIC = [{"name": "specificity", "values": [0, 1], "labels": {"0": "broad", "1": "specific"}}]
NAVIGATION = "e.tagName === 'A' && e.textContent.trim() === 'My studies'"
GUIDELINES = "e.tagName === 'SUMMARY' && e.textContent.includes('Guidelines')"
SUBMIT = "e.type === 'submit' && e.form && e.form.id === 'judgment-form'"
UNSURE = "e.name === 'unsure'"
SKIP = "e.type === 'submit' && e.form && e.form.id === 'skip-form'"
FLAG = "e.tagName === 'SUMMARY' && e.textContent.includes('Flag')"


def from_the_top(page) -> None:
    """Start a Tab walk at the top of the page, as a keyboard user arriving does."""
    page.evaluate("() => { document.activeElement?.blur(); window.scrollTo(0, 0); }")


def focused(page, predicate: str) -> bool:
    return page.evaluate(f"() => {{ const e = document.activeElement; return Boolean(e && ({predicate})); }}")


def check_shortcuts_hold_the_focus(page, back_to: str) -> None:
    """? opens the list; Tab and Shift+Tab stay inside it; Esc closes it and the focus goes back
    to the element `back_to` names."""
    page.keyboard.press("?")
    dialog = page.locator("#shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Close")).to_be_focused()
    for key in ("Tab", "Tab", "Shift+Tab", "Tab"):
        page.keyboard.press(key)
        assert focused(page, "e.closest('#shortcuts')"), focused_text(page)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert focused(page, back_to), focused_text(page)


def test_a_proxy_item_by_keyboard_alone(page, settings):
    settings.MARGINALIA_UNDO_SECONDS = 30
    annotator = make_annotator("reader")
    study = make_relic_proxy_study(3, guidelines="Choose the sentence the critic quoted.")
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    item = shown_item_id(page)

    from_the_top(page)
    tab_to(page, NAVIGATION)
    tab_to(page, GUIDELINES)
    page.keyboard.press("Enter")
    expect(page.locator("details.guidelines")).to_have_attribute("open", "")
    tab_to(page, "e.name === 'choice'")  # the candidates are one stop; arrows move inside
    page.keyboard.press("ArrowDown")
    expect(page.locator("input[name=choice]").first).to_be_checked()
    tab_to(page, SUBMIT)
    tab_to(page, UNSURE)
    page.keyboard.press("Space")
    expect(page.locator("input[name=unsure]")).to_be_checked()
    tab_to(page, SKIP)
    tab_to(page, FLAG)
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    expect(page.locator("#id_flag_reason")).to_be_focused()
    page.keyboard.type("no reason after all")
    page.keyboard.press("Escape")  # leaves the box and closes it
    expect(page.locator("#id_flag_reason")).to_be_hidden()
    assert focused(page, FLAG), focused_text(page)
    # Shift+Tab goes back through the answer and on to the navigation: nothing holds the focus.
    tab_to(page, "e.name === 'choice'", backwards=True)
    tab_to(page, NAVIGATION, backwards=True)
    check_shortcuts_hold_the_focus(page, back_to=NAVIGATION)

    page.keyboard.press("2")
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 3")
    stored = Judgment.objects.get(annotator=annotator)
    assert (stored.item_id, stored.choice.position, stored.unsure) == (item, 1, True)


def test_a_relevance_item_with_spans_a_rubric_and_a_rationale_by_keyboard_alone(page):
    annotator = make_annotator("reader")
    study = make_plot_relevance_study(
        label_schema={"scale": "graded-0-2", "spans": "passage", "rubric": RUBRIC, "rationale": "optional"},
        guidelines="Relevant means the passage tells the event the query describes.",
    )
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    text = page.locator(".passage-text").text_content()
    words = text.split()
    status = page.locator(".span-status")

    from_the_top(page)
    tab_to(page, GUIDELINES)
    tab_to(page, "e.classList.contains('passage-text')")  # the passage is a stop of its own
    expect(status).to_contain_text(f"Selected “{words[0]}”: word 1 of {len(words)}")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Shift+ArrowRight")
    expect(status).to_contain_text(f"Selected “{words[1]} {words[2]}”: words 2–3")
    page.keyboard.press("m")
    expect(page.locator("mark.span-mark")).to_have_text(f"{words[1]} {words[2]}")
    expect(status).to_have_text(f"Marked “{words[1]} {words[2]}”. 1 span marked.")
    page.keyboard.press("End")
    page.keyboard.press("Delete")
    expect(status).to_have_text("No marked span here.")
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Delete")
    expect(page.locator("mark.span-mark")).to_have_count(0)
    expect(status).to_contain_text(f"Removed “{words[1]} {words[2]}”. 0 spans marked.")
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("m")
    phrase = " ".join(words[1:4])
    expect(page.locator("mark.span-mark")).to_have_text(phrase)
    page.keyboard.press("Escape")  # back to the answer
    assert focused(page, "e.name === 'label'"), focused_text(page)
    page.keyboard.press("2")
    page.keyboard.press("Tab")
    assert focused(page, "e.name === 'rubric-specificity'"), focused_text(page)
    page.keyboard.press("1")
    page.keyboard.press("Tab")
    expect(page.locator("#id_rationale")).to_be_focused()
    page.keyboard.type("The letter scene.")
    page.keyboard.press("Shift+Tab")  # out of the box backwards, too
    assert focused(page, "e.name === 'rubric-specificity'"), focused_text(page)
    page.keyboard.press("Tab")
    page.keyboard.press("Escape")  # Esc leaves the box
    assert not focused(page, "e.tagName === 'TEXTAREA'"), focused_text(page)
    tab_to(page, SUBMIT)
    tab_to(page, UNSURE)
    tab_to(page, SKIP)
    tab_to(page, FLAG)
    check_shortcuts_hold_the_focus(page, back_to=FLAG)
    tab_to(page, SUBMIT, backwards=True)
    page.keyboard.press("Enter")

    expect(progress(page)).to_have_text("1 / 4")
    judgment = Judgment.objects.get(annotator=annotator)
    start = text.index(phrase)
    assert judgment.label == 2 and judgment.rubric == {"specificity": 1}
    assert judgment.rationale == "The letter scene."
    assert judgment.spans == [{"target": "passage", "start": start, "end": start + len(phrase)}]


def test_a_multi_select_item_and_a_peer_review_by_keyboard_alone(page):
    annotator = make_annotator("reader")
    pilot = make_speech_quotability_study(multi_select=True)
    sign_in(page, "reader")
    page.goto(f"/annotate/{pilot.pk}/")
    from_the_top(page)
    tab_to(page, "e.name === 'selections'")
    page.keyboard.press("Space")  # the first paragraph
    page.keyboard.press("Tab")  # each paragraph is a stop of its own
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # the third
    tab_to(page, SKIP)
    tab_to(page, "e.name === 'selections'", backwards=True)
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 1")
    assert Judgment.objects.get(annotator=annotator).selections == [0, 2]

    relevance = make_plot_relevance_study(label_schema={"rationale": "optional"})
    judged = add_label_judgment(relevance.items.order_by("position").last(), make_annotator("ann-a"), 1)
    PeerReview.objects.create(judgment=judged, reviewer=annotator)
    page.goto(f"/studies/{relevance.pk}/review/")
    from_the_top(page)
    tab_to(page, "e.name === 'verdict'")
    page.keyboard.press("p")
    page.keyboard.press("Tab")
    expect(page.locator("#id_comment")).to_be_focused()
    page.keyboard.type("Follows the guidelines.")
    page.keyboard.press("Escape")
    assert focused(page, "e.name === 'verdict'"), focused_text(page)
    check_shortcuts_hold_the_focus(page, back_to="e.name === 'verdict'")
    page.keyboard.press("Enter")
    expect(page.locator("#reviews-finished")).to_be_visible()
    review = PeerReview.objects.get()
    assert (review.verdict, review.comment) == ("pass", "Follows the guidelines.")


def test_a_qualification_question_by_keyboard_alone_offers_no_skip_or_flag(page):
    make_annotator("newcomer")
    study = make_plot_relevance_study()
    with_qualification_round(study, questions=2, threshold=0.5, attempts=2)
    sign_in(page, "newcomer")
    page.goto(f"/annotate/{study.pk}/")
    expect(page.locator("#qualification-banner")).to_contain_text("question 1 of 2")
    expect(page.locator("#skip-form")).to_have_count(0)
    from_the_top(page)
    tab_to(page, "e.name === 'label'")
    tab_to(page, SUBMIT)
    tab_to(page, NAVIGATION)  # past the end of the page and round to the top
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).not_to_contain_text("skip the item")
    page.keyboard.press("Escape")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#qualification-banner")).to_contain_text("question 2 of 2")


def test_after_a_skip_the_previous_answers_undo_bar_is_gone(page, settings):
    settings.MARGINALIA_UNDO_SECONDS = 60
    annotator = make_annotator("reader")
    study = make_relic_proxy_study(4)
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 4")
    expect(page.locator("#undo-form")).to_be_visible()

    page.keyboard.press("s")

    expect(page.locator(".messages-box")).to_contain_text("Item skipped")
    expect(page.locator("#undo-form")).to_have_count(0)
    page.keyboard.press("z")  # nothing to take back any more
    expect(progress(page)).to_have_text("1 / 4")
    assert Judgment.objects.filter(annotator=annotator).count() == 1


def test_auto_advance_submits_the_last_answer_an_item_needs(page, settings):
    settings.MARGINALIA_UNDO_SECONDS = 30
    annotator = make_annotator("reader")
    proxy = apply_presentation(make_relic_proxy_study(3), auto_advance=True)
    sign_in(page, "reader")
    page.goto(f"/annotate/{proxy.pk}/")
    page.keyboard.press("ArrowDown")  # arrows only move the choice
    page.keyboard.press("ArrowDown")
    expect(progress(page)).to_have_text("0 / 3")
    page.keyboard.press("u")
    page.keyboard.press("3")  # the key submits, without Enter
    expect(progress(page)).to_have_text("1 / 3")
    first = Judgment.objects.get(annotator=annotator)
    assert first.choice.position == 2 and first.unsure
    page.locator("input[name=choice]").nth(1).locator("xpath=..").click()  # a click too
    expect(progress(page)).to_have_text("2 / 3")
    page.keyboard.press("z")  # and the undo bar still takes it back
    expect(progress(page)).to_have_text("1 / 3")

    rubric = make_plot_relevance_study(label_schema={"scale": "graded-0-2", "rubric": RUBRIC})
    apply_presentation(rubric, auto_advance=True)
    page.goto(f"/annotate/{rubric.pk}/")
    page.keyboard.press("2")  # the rubric still lacks an answer: nothing is sent
    expect(page.locator("input[name=label][value='2']")).to_be_checked()
    expect(progress(page)).to_have_text("0 / 4")
    page.keyboard.press("Tab")
    page.keyboard.press("0")  # now the answer is complete
    expect(progress(page)).to_have_text("1 / 4")
    assert Judgment.objects.get(item__study=rubric).rubric == {"specificity": 0}


def test_a_studys_own_keys_are_shown_and_used(page):
    annotator = make_annotator("reader")
    study = make_relic_proxy_study(4, candidates=4)
    apply_presentation(study, keyboard={"options": "asdf", "skip": "x", "unsure": "q", "flag": ""})
    sign_in(page, "reader")
    page.goto(f"/annotate/{study.pk}/")

    expect(page.locator(".candidate .option-key")).to_have_text(["a", "s", "d", "f"])
    expect(page.locator(".keys")).to_contain_text("a s d f")
    expect(page.get_by_role("button", name="Skip x")).to_be_visible()
    expect(page.locator("#flag-box summary kbd")).to_have_count(0)  # no key for flagging
    page.keyboard.press("?")
    shortcuts = page.locator("#shortcuts")
    expect(shortcuts.locator("tr", has_text="skip the item")).to_contain_text("x")
    expect(shortcuts.locator("tr", has_text="mark the answer unsure")).to_contain_text("q")
    expect(shortcuts).not_to_contain_text("flag the item")
    page.keyboard.press("Escape")

    page.keyboard.press("1")  # not a key of this study any more
    page.keyboard.press("r")
    expect(page.locator("input[name=choice]:checked")).to_have_count(0)
    expect(page.locator("#flag-box")).not_to_have_attribute("open", "")
    skipped = shown_item_id(page)
    page.keyboard.press("x")
    expect(page.locator(".messages-box")).to_contain_text("Item skipped")
    assert shown_item_id(page) != skipped
    page.keyboard.press("q")
    page.keyboard.press("d")
    page.keyboard.press("Enter")
    expect(progress(page)).to_have_text("1 / 4")
    judgment = Judgment.objects.get(annotator=annotator)
    assert judgment.unsure and judgment.choice == ItemCandidate.objects.get(item=judgment.item, position=2)
    assert Study.objects.get(pk=study.pk).keyboard == {"options": "asdf", "skip": "x", "unsure": "q", "flag": ""}
