"""The staff dashboard: what staff see (collections, recent runs with metrics, jobs with live
progress), starting a run from its form, and who may see it at all."""

import re

import pytest
from django.urls import reverse

from jobs.models import Job
from retrieval.metrics import evaluate_run
from retrieval.models import Run
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.factories import make_annotator, make_relic_collection

pytestmark = pytest.mark.django_db

DASHBOARD = "/dashboard/"


def test_the_dashboard_is_for_staff_only(client):
    assert reverse("dashboard") == DASHBOARD
    signed_out = client.get(DASHBOARD)
    assert signed_out.status_code == 302 and signed_out["Location"].startswith("/accounts/login/")
    client.force_login(make_annotator())
    assert client.get(DASHBOARD).status_code == 403


def test_staff_see_collections_runs_with_metrics_and_links_to_studies(staff_client):
    collection = make_relic_collection(2, name="austen-demo")
    run = execute_run(create_run(collection, get_or_create_retriever("bm25"), depth=10))
    mean_rank = evaluate_run(run)["metrics"]["mean_rank"]

    page = staff_client.get(DASHBOARD).content.decode()

    assert "austen-demo" in page
    assert f'data-run="{run.pk}"' in page
    assert f'<td class="num">{mean_rank:.3f}</td>' in page
    assert f'href="/api/runs/{run.pk}/trec/"' in page
    assert f'href="/api/collections/{collection.pk}/qrels/"' in page
    assert f'href="{reverse("study_list")}"' in page


def test_jobs_show_progress_bars_that_poll_the_job_api_from_our_own_script_and_link_the_job_page(staff_client):
    job = Job.objects.create(kind="retrieve", queue="cpu", status=Job.Status.RUNNING, progress=0.4, message="set 2/5")

    page = staff_client.get(DASHBOARD).content.decode()

    row = re.search(rf'<tr class="job" data-job="{job.pk}" data-finished="0"[^>]*>.*?</tr>', page, re.S).group(0)
    assert 'style="width: 40%"' in row
    assert "set 2/5" in row
    assert f'href="/jobs/{job.pk}/"' in row and "/api/jobs/" not in row
    # When the job ends, the lists it changes are fetched again (no "Reload for results").
    assert 'data-refresh="jobs runs collections retrievers"' in row
    assert re.findall(r"<script[^>]+src=\"([^\"]+)\"", page) == ["/static/jobs/jobs.js"]
    assert "Reload for results" not in page


def test_start_a_run_offers_only_what_can_be_started(staff_client):
    make_relic_collection(1)
    page = staff_client.get(DASHBOARD).content.decode()
    form = page[page.index('id="run-retriever"') : page.index("</select>", page.index('id="run-retriever"'))]
    assert re.findall(r'<option value="(\w+)"', form) == ["bm25", "dense"]


def test_the_form_starts_a_run_on_the_chosen_collection(staff_client, django_capture_on_commit_callbacks):
    collection = make_relic_collection(1)

    with django_capture_on_commit_callbacks(execute=False) as sent:
        response = staff_client.post(
            DASHBOARD,
            {
                "collection": collection.pk,
                "retriever": "bm25",
                "k1": "1.2",
                "b": "0.75",
                "context_left": "4",
                "context_right": "0",
                "depth": "50",
                "model": "",
            },
            follow=True,
        )

    run = Run.objects.get()
    assert response.redirect_chain == [(DASHBOARD, 302)]
    assert (run.collection, run.retriever.parameters) == (collection, {"k1": 1.2, "b": 0.75})
    assert (run.parameters["context_right"], run.parameters["depth"]) == (0, 50)
    assert (run.job.queue, run.job.status, len(sent)) == ("cpu", Job.Status.PENDING, 1)
    assert f'Run {run.pk} queued as <a href="/jobs/{run.job_id}/">job {run.job_id}</a>' in response.content.decode()


def test_a_bad_form_shows_the_error_beside_its_field_and_starts_nothing(staff_client):
    collection = make_relic_collection(1)

    response = staff_client.post(
        DASHBOARD,
        {
            "collection": collection.pk,
            "retriever": "bm25",
            "k1": "-3",
            "b": "0.9",
            "context_left": "4",
            "context_right": "4",
            "depth": "100",
        },
    )

    assert response.status_code == 400
    page = response.content.decode()
    assert re.search(r'name="k1" value="-3".*?<p class="error">must be a positive number', page, re.S)
    assert (Run.objects.count(), Job.objects.count()) == (0, 0)
