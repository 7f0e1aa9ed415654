"""The run page: parameters, every metric with its standard error (the numbers evaluate_run
gives), by quote length, the recall@k plot, one row per query with the gold's rank, the TREC
export; deleting a run (refused while a study uses it); staff only."""

import re

import pytest
from django.urls import reverse

from retrieval.metrics import evaluate_run
from retrieval.models import Hit, Run, RunQuery
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.factories import make_annotator, make_relic_collection, make_relic_proxy_study

pytestmark = pytest.mark.django_db


def bm25_run(collection, **parameters) -> Run:
    return execute_run(create_run(collection, get_or_create_retriever("bm25"), depth=10, **parameters))


def cell(html: str, row_attribute: str, column: int) -> str:
    row = re.search(rf"<tr {row_attribute}>(.*?)</tr>", html, re.S).group(1)
    return re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[column]).strip()


def test_the_run_page_shows_parameters_metrics_with_standard_errors_and_each_querys_gold_rank(staff_client):
    collection = make_relic_collection(5, quote_length=2, name="two-sentence quotes")
    run = bm25_run(collection)
    report = evaluate_run(run)

    html = staff_client.get(reverse("run_page", args=[run.pk])).content.decode()

    assert f"Run {run.pk}: {run.retriever.name} on two-sentence quotes" in html
    assert "k1 0.5, b 0.9" in html and "4 left / 4 right sentences" in html and "10 hits stored" in html
    for name in ("recall@1", "recall@10", "mean_rank", "mrr@10", "ndcg@10", "n_rodcg@10"):
        assert cell(html, f'data-metric="{name}"', 1) == f"{report['metrics'][name]:.3f}"
        assert cell(html, f'data-metric="{name}"', 2) == f"{report['stderr'][name]:.3f}"
    assert f"Over {report['queries']} judged queries" in html
    assert 'data-length="2"' in html and 'data-length-metric="recall@1"' in html
    for result in RunQuery.objects.filter(run=run).select_related("query"):
        assert cell(html, f'data-query="{result.query.external_id}"', 5) == str(min(result.relevant_ranks.values()))
    assert html.count('<g class="point">') == 6  # recall@1 .. recall@100
    assert f"recall@10: {report['metrics']['recall@10']:.3f}" in html
    assert f'href="/api/runs/{run.pk}/trec/"' in html


def test_the_dashboard_links_runs_and_collections_to_their_pages(staff_client):
    run = bm25_run(make_relic_collection(2))
    html = staff_client.get(reverse("dashboard")).content.decode()
    assert f'href="/runs/{run.pk}/"' in html and f'href="/collections/{run.collection_id}/"' in html


def test_a_run_without_metrics_says_so(staff_client):
    run = create_run(make_relic_collection(1), get_or_create_retriever("bm25"))
    html = staff_client.get(reverse("run_page", args=[run.pk])).content.decode()
    assert "No metrics yet: the run is pending." in html
    assert "has not finished (cancel its job first)" in html


def test_deleting_a_run_removes_it_with_its_hits(staff_client):
    run = bm25_run(make_relic_collection(2))
    response = staff_client.post(reverse("run_delete", args=[run.pk]), {"confirm": "yes"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("dashboard")
    assert f"Run {run.pk} deleted with its hits." in response.content.decode()
    assert not Run.objects.filter(pk=run.pk).exists() and not Hit.objects.filter(run_id=run.pk).exists()


def test_deleting_a_run_needs_the_box_ticked(staff_client):
    run = bm25_run(make_relic_collection(1))
    response = staff_client.post(reverse("run_delete", args=[run.pk]), follow=True)
    assert "tick the box to confirm" in response.content.decode()
    assert Run.objects.filter(pk=run.pk).exists()


def test_a_run_a_study_draws_negatives_from_cannot_be_deleted(staff_client):
    study = make_relic_proxy_study(3, name="needs its negatives")
    run = study.negatives_run
    page = staff_client.get(reverse("run_page", args=[run.pk])).content.decode()
    assert "study &#x27;needs its negatives&#x27; uses its rankings" in page

    response = staff_client.post(reverse("run_delete", args=[run.pk]), {"confirm": "yes"}, follow=True)
    assert f"run {run.pk} cannot be deleted: study &#x27;needs its negatives&#x27; uses its rankings" in (
        response.content.decode()
    )
    assert Run.objects.filter(pk=run.pk).exists()


@pytest.mark.parametrize("method, name", [("get", "run_page"), ("post", "run_delete")])
def test_only_staff_reach_run_pages(client, method, name):
    run = bm25_run(make_relic_collection(1))
    url = reverse(name, args=[run.pk])
    anonymous = getattr(client, method)(url, {"confirm": "yes"})
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    client.force_login(make_annotator())
    assert getattr(client, method)(url, {"confirm": "yes"}).status_code == 403
    assert Run.objects.filter(pk=run.pk).exists()
