"""The staff side in a real Chromium: from the dashboard to a run page (metrics, plot, per-query
ranks, TREC export), and to a study page with answers and exports, then closing the study."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import Study
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.browser.conftest import sign_in
from tests.factories import (
    add_label_judgment,
    make_annotator,
    make_plot_relevance_study,
    make_relic_collection,
    make_user,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_staff_open_a_run_page_from_the_dashboard(page):
    make_user("curator", staff=True)
    run = execute_run(create_run(make_relic_collection(4, name="novel"), get_or_create_retriever("bm25"), depth=10))
    sign_in(page, "curator")
    page.goto("/dashboard/")
    page.locator(f'#runs tr[data-run="{run.pk}"] a', has_text=str(run.pk)).click()

    expect(page.locator("h1")).to_contain_text(f"Run {run.pk}")
    expect(page.locator('tr[data-metric="recall@10"] td').nth(1)).to_have_text(
        f"{run.metrics['metrics']['recall@10']:.3f}"
    )
    expect(page.locator("svg.recall-curve g.point")).to_have_count(6)
    expect(page.locator("#queries tbody tr")).to_have_count(4)
    with page.expect_download() as download:
        page.get_by_role("link", name="TREC run file").click()
    lines = Path(download.value.path()).read_text().splitlines()
    assert lines and lines[0].endswith(f"marginalia-bm25-{run.pk}")


def test_staff_read_answers_follow_exports_and_close_a_study(page):
    make_user("curator", staff=True)
    study = make_plot_relevance_study(label_schema={"rationale": "optional"}, name="plots")
    add_label_judgment(study.items.order_by("position").first(), make_annotator("ada"), 1, rationale="Same plot.")
    sign_in(page, "curator")
    page.goto("/studies/")
    page.get_by_role("link", name="plots").click()

    expect(page.locator(".rationale")).to_have_text("“Same plot.”")
    expect(page.locator('tr[data-annotator="ada"] td').nth(1)).to_have_text("1")
    response = page.request.get(page.get_by_role("link", name="Judgments JSONL").get_attribute("href"))
    assert response.ok and '"rationale": "Same plot."' in response.text()

    page.get_by_role("button", name="Close the study").click()
    expect(page.locator("ul.messages")).to_contain_text("is closed")
    expect(page.locator(".status-badge")).to_have_text("Closed")
    assert Study.objects.get(pk=study.pk).status == Study.Status.CLOSED
    expect(page.get_by_role("button", name="Reopen the study")).to_be_visible()
