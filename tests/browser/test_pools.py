"""A test collection built in a real Chromium: staff pool three runs under a budget on the "new
relevance study" form (move-to-front), two annotators judge part of it on the annotation page,
and staff grow the pool with a fourth run from the study page; the judgments stay and the new
run's pairs reach the annotators."""

import pytest
from playwright.sync_api import expect

from annotation.models import Judgment, PooledPair, Study
from tests.annotation.test_pools import RANKINGS, RELEVANT, ranked_runs
from tests.browser.conftest import sign_in
from tests.factories import make_annotator, make_label_collection, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def judge_on_the_page(page, count: int | None = None) -> list[str]:
    """Answer items with the keyboard (1 for the relevant passages, 0 otherwise): `count` of
    them, or until the page says nothing is left."""
    judged = []
    while count is None or len(judged) < count:
        if count is None and page.locator("#study-finished").count():
            return judged
        item = int(page.locator("#judgment-form input[name=item]").input_value())
        pair = PooledPair.objects.select_related("passage").get(item_id=item)
        page.keyboard.press("1" if pair.passage.external_id in RELEVANT else "0")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "item => !document.querySelector(`#judgment-form input[name=item][value='${item}']`)", arg=item
        )
        judged.append(pair.passage.external_id)
    return judged


def test_staff_pool_three_runs_under_a_budget_annotators_judge_and_a_fourth_run_joins(page, browser, live_server):
    make_user("curator", staff=True)
    collection = make_label_collection(1, 12)
    runs = ranked_runs(
        collection, {**{name: {"q0": order} for name, order in RANKINGS.items()}, "D": {"q0": ["d10", "d11", "d4"]}}
    )
    make_annotator("ada")
    make_annotator("ben")

    sign_in(page, "curator")
    page.goto("/studies/new/relevance/")
    page.fill("#id_name", "Pooled reading")
    page.select_option("#id_collection", str(collection.pk))
    for name in ("A", "B", "C"):
        page.get_by_label(f"run {runs[name].pk}:").check()
    page.fill("#id_depth", "4")
    page.select_option("#id_pool", "mtf")
    page.fill("#id_budget", "6")
    page.fill("#id_judgments_per_item", "1")
    page.get_by_role("button", name="Create study").click()
    expect(page.locator("ul.messages")).to_contain_text("created with 1 item")
    study = Study.objects.get(name="Pooled reading")
    expect(page.locator("#pool .pool-strategy")).to_contain_text("mtf")
    expect(page.locator("#pool .pool-drawn")).to_contain_text("1 to judge of 10 pooled · budget 6")

    annotators = []
    for name in ("ada", "ben"):
        context = browser.new_context(base_url=live_server.url)
        tab = context.new_page()
        sign_in(tab, name)
        tab.goto(f"/annotate/{study.pk}/")
        annotators.append((context, tab))
    judged = judge_on_the_page(annotators[0][1], 2) + judge_on_the_page(annotators[1][1], 2)
    assert Judgment.objects.filter(item__study=study).count() == 4
    first_three = {passage for name in ("A", "B", "C") for passage in RANKINGS[name]}
    assert set(judged) <= first_three

    page.reload()
    expect(page.locator("#pool tr[data-run]")).to_have_count(3)
    page.get_by_label(f"run {runs['D'].pk}:").check()
    page.fill("#id_budget", "2")
    page.get_by_role("button", name="Add to the pool").click()
    expect(page.locator("ul.messages")).to_contain_text("1 run added: 2 new pairs, 1 pair already pooled")
    expect(page.locator("#pool tr[data-run]")).to_have_count(4)
    expect(page.locator(f'#pool tr[data-run="{runs["D"].pk}"]')).to_contain_text("step 1")
    expect(page.locator("#pool .pool-drawn")).to_contain_text("budget 8")
    assert Judgment.objects.filter(item__study=study).count() == 4  # every judgment stays

    # Both go on until the grown budget is spent: eight pairs judged once each, none twice.
    for _, tab in annotators:
        tab.goto(f"/annotate/{study.pk}/")
    judge_on_the_page(annotators[0][1])
    judge_on_the_page(annotators[1][1])
    judgments = Judgment.objects.filter(item__study=study)
    assert judgments.count() == study.items.count() == 8
    assert judgments.values("item").distinct().count() == 8
    page.reload()
    expect(page.locator("#pool .pool-drawn")).to_contain_text("8 to judge of 12 pooled · budget 8 · 8 decided")
    page.locator("#pool").screenshot(path="/tmp/pool-study-page.png")
    for context, _ in annotators:
        context.close()
