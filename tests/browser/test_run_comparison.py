"""The staff comparison page in a real Chromium: the runs' table with standard errors, the paired
tests, and the plots (each run with its 95 % interval, per-query differences) drawn as SVG."""

import re

import pytest

from evaluation.comparison import compare_runs
from retrieval.services.external_runs import save_ranked_run
from tests.browser.conftest import sign_in
from tests.factories import add_qrels, make_annotator, make_collection, make_passages, make_query, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def two_runs():
    collection = make_collection("compared")
    passages = make_passages(collection, 4)
    queries = [make_query(collection, f"q{i}") for i in range(4)]
    for query, passage in zip(queries, passages, strict=True):
        add_qrels(query, {passage: 1})
    good = save_ranked_run(
        collection,
        name="good",
        retriever="good",
        rankings={
            q: [(p, 1.0 if p == g else 0.1 * i) for i, p in enumerate(passages)]
            for q, g in zip(queries, passages, strict=True)
        },
    )
    poor = save_ranked_run(
        collection,
        name="poor",
        retriever="poor",
        rankings={
            q: [(p, 0.0 if p == g else 1.0 + i) for i, p in enumerate(passages)]
            for q, g in zip(queries, passages, strict=True)
        },
    )
    return good, poor


def test_staff_compare_two_runs_with_tables_and_plots(page):
    good, poor = two_runs()
    make_user("organiser", staff=True)
    sign_in(page, "organiser")
    page.goto("/runs/compare/")
    page.fill("#runs", f"{good.pk},{poor.pk}")
    page.fill("#metrics", "nDCG@10 R@1")
    page.click("#compare-form button")
    page.wait_for_selector("#run-table")
    expected = compare_runs([good.pk, poor.pk], "nDCG@10 R@1")
    table = page.inner_text("#run-table")
    assert "good (run" in table and "poor (run" in table
    assert f"{expected['runs'][good.pk]['metrics']['ndcg@10']:.4f}" in table
    tests = page.inner_text("#test-table")
    assert re.search(r"ndcg@10\s+good", tests) and "recall@1" in tests
    assert page.locator("svg.run-intervals circle").count() == 2
    assert page.locator("svg.query-differences rect.difference").count() == 4
    page.click("section a:has-text('recall@1')")
    page.wait_for_url(re.compile(r"metric=recall%401"))
    assert "recall@1 with 95% intervals" in page.inner_html("svg.run-intervals")


def test_bad_run_ids_show_one_error(page):
    make_user("organiser", staff=True)
    sign_in(page, "organiser")
    response = page.goto("/runs/compare/?runs=999998,999999")
    assert response.status == 400
    assert "no run with id '999998'" in page.inner_text("[role=alert]")


def test_annotators_and_visitors_are_kept_out(page):
    good, poor = two_runs()
    url = f"/runs/compare/?runs={good.pk},{poor.pk}"
    assert "/accounts/login/" in (page.goto(url) and page.url)
    make_annotator("reader")
    sign_in(page, "reader")
    assert page.goto(url).status == 403
