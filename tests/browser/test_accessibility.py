"""axe-core on every annotator and staff page in a real Chromium (issue 21.5): no serious or
critical violation (contrast, names, labels, landmarks, headings, ARIA), and the keyboard
reaches every control of each page by Tab alone (a trap anywhere would leave some out). The
annotator pages are checked for each kind of item (proxy; relevance with spans, a rubric and a
rationale; quotability, yes/no and the multi-select pilot; a qualification question and its
result), the peer review, the end of a study, a refusal and the home page, each also in the
states a person brings about (the list of shortcuts open, the flag box open, a span marked, the
undo bar after an answer); the staff pages are every page there is now."""

import pytest
from playwright.sync_api import expect

from annotation.models import Judgment, PeerReview, Study
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.browser.accessibility import blocking_violations, unreachable_by_tab
from tests.browser.conftest import sign_in
from tests.browser.test_quality_gate import with_qualification_round
from tests.factories import (
    add_judgment,
    add_label_judgment,
    make_annotator,
    make_plot_relevance_study,
    make_relic_proxy_study,
    make_speech_quotability_study,
    make_user,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUBRIC = [{"name": "specificity", "values": [0, 1], "labels": {"0": "broad", "1": "specific"}}]


def check(page, where: str, problems: dict, *, keyboard: bool = True) -> None:
    """Record the page's blocking axe violations and the controls Tab never reaches."""
    violations = blocking_violations(page)
    if violations:
        problems[f"{where}: axe"] = violations
    if keyboard:
        unreachable = unreachable_by_tab(page)
        if unreachable:
            problems[f"{where}: not reachable by Tab"] = unreachable


@pytest.fixture
def studies():
    """One study of every kind an annotator meets, with the judgments that make the peer review,
    the reports, the quality and adjudication pages non-empty."""
    make_user("curator", staff=True)
    reader = make_annotator("reader")
    ann_a, ann_b = make_annotator("ann-a"), make_annotator("ann-b")
    proxy = make_relic_proxy_study(4, name="proxy study", guidelines="Choose the sentence the critic quoted.")
    for item in proxy.items.order_by("position")[:2]:
        add_judgment(item, ann_a, 0)
        add_judgment(item, ann_b, 1)
    relevance = make_plot_relevance_study(
        name="relevance study",
        guidelines="Relevant means the passage tells the event the query describes.",
        label_schema={"scale": "graded-0-2", "spans": "passage", "rubric": RUBRIC, "rationale": "optional"},
    )
    reviewed = add_label_judgment(relevance.items.order_by("position").last(), ann_a, 2, rationale="Same scene.")
    add_label_judgment(relevance.items.order_by("position").last(), ann_b, 0)
    PeerReview.objects.create(judgment=reviewed, reviewer=reader)
    quotability = make_speech_quotability_study(name="quotability study")
    pilot = make_speech_quotability_study(name="pilot study", multi_select=True)
    qualification = make_plot_relevance_study(name="qualification study")
    with_qualification_round(qualification, questions=2, threshold=1.0, attempts=2)
    closed = make_relic_proxy_study(2, name="closed study")
    Study.objects.filter(pk=closed.pk).update(status=Study.Status.CLOSED)
    refused = make_relic_proxy_study(2, name="named study")
    refused.annotators.set([ann_a])
    return {
        "proxy": proxy,
        "relevance": relevance,
        "quotability": quotability,
        "pilot": pilot,
        "qualification": qualification,
        "closed": closed,
        "refused": refused,
    }


def test_every_annotator_page_passes_axe_and_the_keyboard_reaches_every_control(page, studies):
    problems = {}
    sign_in(page, "reader")
    check(page, "home", problems)

    page.goto(f"/annotate/{studies['proxy'].pk}/")
    check(page, "proxy item", problems)
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    check(page, "proxy item, shortcuts open", problems, keyboard=False)
    page.keyboard.press("Escape")
    page.keyboard.press("r")
    expect(page.locator("#id_flag_reason")).to_be_focused()
    check(page, "proxy item, flag box open", problems)
    page.keyboard.press("Escape")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#undo-form")).to_be_visible()
    check(page, "proxy item, undo bar", problems)

    page.goto(f"/annotate/{studies['relevance'].pk}/")
    check(page, "relevance item", problems)
    page.locator(".passage-text").focus()
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("m")
    expect(page.locator("mark.span-mark")).to_have_count(1)
    check(page, "relevance item, span marked", problems)

    page.goto(f"/annotate/{studies['quotability'].pk}/")
    check(page, "quotability item", problems)
    page.goto(f"/annotate/{studies['pilot'].pk}/")
    check(page, "multi-select pilot item", problems)

    page.goto(f"/annotate/{studies['qualification'].pk}/")
    expect(page.locator("#qualification-banner")).to_be_visible()
    check(page, "qualification question", problems)
    for question in (1, 2):  # answer 0 to questions expecting 1 then 0: one wrong, the attempt fails
        expect(page.locator("#qualification-banner")).to_contain_text(f"question {question} of 2")
        page.keyboard.press("0")
        page.keyboard.press("Enter")
    expect(page.locator("#qualification-result")).to_be_visible()
    check(page, "qualification result", problems)

    page.goto(f"/studies/{studies['relevance'].pk}/review/")
    expect(page.locator("#reviewed-answer")).to_be_visible()
    check(page, "peer review", problems)
    page.keyboard.press("p")
    page.keyboard.press("Enter")
    expect(page.locator("#reviews-finished")).to_be_visible()
    check(page, "peer review, nothing left", problems)

    page.goto(f"/annotate/{studies['closed'].pk}/")
    expect(page.locator("#study-finished")).to_be_visible()
    check(page, "finished study", problems)
    page.goto(f"/annotate/{studies['refused'].pk}/")
    expect(page.locator(".refused")).to_be_visible()
    check(page, "refused", problems)

    assert problems == {}
    assert Judgment.objects.filter(annotator__username="reader").count() == 1


def test_every_staff_page_passes_axe_and_the_keyboard_reaches_every_control(
    page, browser, live_server, studies, tmp_path
):
    proxy, relevance = studies["proxy"], studies["relevance"]
    run = execute_run(create_run(proxy.collection, get_or_create_retriever("bm25"), depth=10))
    other = execute_run(create_run(proxy.collection, get_or_create_retriever("bm25", k1=1.2, b=0.75), depth=10))
    problems = {}

    anonymous = browser.new_context(base_url=live_server.url).new_page()
    anonymous.goto("/accounts/login/")
    check(anonymous, "login", problems)
    anonymous.context.close()

    sign_in(page, "curator")
    pages = {
        "staff home": "/",
        "dashboard": "/dashboard/",
        "collection": f"/collections/{proxy.collection_id}/",
        "run": f"/runs/{run.pk}/",
        "study list": "/studies/",
        "proxy study page": f"/studies/{proxy.pk}/",
        "relevance study page": f"/studies/{relevance.pk}/",
        "new proxy study": "/studies/new/",
        "new relevance study": "/studies/new/relevance/",
        "new quotability study": "/studies/new/quotability/",
        "quality": f"/studies/{proxy.pk}/quality/",
        "adjudicate": f"/studies/{proxy.pk}/adjudicate/",
        "proxy report": f"/studies/{proxy.pk}/report/",
        "relevance report": f"/studies/{relevance.pk}/report/",
        "recruiting": f"/studies/{proxy.pk}/recruiting/",
        "compare runs": f"/runs/compare/?runs={run.pk},{other.pk}",
    }
    for where, url in pages.items():
        page.goto(url)
        check(page, where, problems)

    # The forms as they come back with errors: a study form refused, an upload refused.
    page.goto("/studies/new/")
    with page.expect_navigation():
        page.get_by_role("button", name="Create study").click()
    expect(page.locator(".field-error").first).to_be_visible()
    check(page, "new proxy study, refused", problems)
    not_a_book = tmp_path / "notes.zip"
    not_a_book.write_bytes(b"PK not really a book")
    page.goto("/dashboard/")
    page.select_option("#upload-kind", "book")
    page.set_input_files("#upload-file", str(not_a_book))
    with page.expect_navigation():
        page.get_by_role("button", name="Upload").click()
    expect(page.locator(".upload-error")).to_be_visible()
    check(page, "upload refused", problems)

    assert problems == {}
