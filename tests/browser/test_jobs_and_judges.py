"""The job page and the judges pages in a real Chromium (issue 21.2, 21.3): a job's progress
moves on its page as the worker reports (the test plays the worker), it is cancelled and retried
with its buttons; staff register a judge of each backend through its form and edit one into a
new version; without the endpoint permission the endpoint form is disabled and says why."""

import pytest
from playwright.sync_api import expect

from jobs.models import Job
from jobs.services import create_job, dispatch_children, job_progress
from judges.models import Judge
from judges.secrets import ENDPOINT_PERMISSION
from retrieval import tasks
from retrieval.models import Run
from retrieval.services.runs import create_run, get_or_create_retriever
from tests.browser.conftest import sign_in
from tests.factories import grant, make_relic_collection, make_relic_proxy_study, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def sharded_run():
    """A BM25 run queued in two shards, waiting for a worker (the test plays it)."""
    run = create_run(make_relic_collection(4, name="ledger"), get_or_create_retriever("bm25"))
    run.job = create_job("retrieve", "cpu", {"run_id": run.pk, "retriever": "bm25", "collection": "ledger"})
    run.save(update_fields=["job"])
    dispatch_children(run.job, tasks.run_bm25, [[run.pk, [[0, 0, 2]]], [run.pk, [[0, 2, 4]]]])
    return run


def test_the_job_page_follows_progress_and_cancels_and_retries_with_its_buttons(page, sharded_run):
    make_user("curator", staff=True)
    sign_in(page, "curator")
    page.goto("/dashboard/")
    page.locator(f'tr.job[data-job="{sharded_run.job_id}"] a', has_text=f"#{sharded_run.job_id}").click()

    expect(page.get_by_role("heading", level=1)).to_have_text(f"Job {sharded_run.job_id}: retrieve")
    expect(page.locator("#job .job-status").first).to_have_text("pending")
    expect(page.locator("tr[data-shard]")).to_have_count(2)

    # A worker takes the first shard and reports: the page shows it without a reload.
    first = sharded_run.job.children.order_by("pk").first()
    Job.objects.filter(pk__in=[first.pk, sharded_run.job_id]).update(status=Job.Status.RUNNING)
    job_progress(first.pk)(0.5, "book 1 of 2")
    expect(page.locator("#job .job-percent")).to_have_text("25 %")
    expect(page.locator(f'tr[data-shard="{first.pk}"] .job-message')).to_have_text("book 1 of 2")
    expect(page.get_by_role("progressbar", name=f"Progress of job {sharded_run.job_id}")).to_have_attribute(
        "aria-valuenow", "25"
    )

    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("ul.messages")).to_contain_text(f"Job {sharded_run.job_id} cancelled.")
    expect(page.locator("#job .job-status").first).to_have_text("cancelled")
    assert Run.objects.get(pk=sharded_run.pk).status == Run.Status.CANCELLED

    # The worker sees the cancellation and stops its shard (a retry waits for parts still running).
    Job.objects.filter(pk=first.pk).update(status=Job.Status.CANCELLED)
    page.get_by_role("button", name="Retry job").click()
    expect(page.locator("ul.messages")).to_contain_text(f"Job {sharded_run.job_id} queued again on the cpu queue.")
    expect(page.locator("#job .job-status").first).to_have_text("pending")
    expect(page.get_by_role("button", name="Cancel job")).to_be_visible()
    assert Run.objects.get(pk=sharded_run.pk).status == Run.Status.PENDING

    # The job ends while the page is open: the page is fetched again, with its final state.
    for child in sharded_run.job.children.all():
        Job.objects.filter(pk=child.pk).update(status=Job.Status.SUCCEEDED, progress=1.0)
    Job.objects.filter(pk=sharded_run.job_id).update(status=Job.Status.SUCCEEDED, progress=1.0, message="done")
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    expect(page.locator("#job .job-percent")).to_have_text("100 %")


def fill_common(form, *, temperature: str = "0", max_tokens: str = "8") -> None:
    form.get_by_label("Temperature").fill(temperature)
    form.get_by_label("Seed").fill("0")
    form.get_by_label("Max tokens").fill(max_tokens)


def test_staff_register_a_judge_of_each_backend_by_form_and_edit_one_into_a_new_version(page, settings):
    settings.MARGINALIA_OUTBOUND_ALLOW = ["127.0.0.1"]  # the endpoint is a model server on this machine
    grant(make_user("lead", staff=True), ENDPOINT_PERMISSION)
    study = make_relic_proxy_study(2)
    sign_in(page, "lead")
    page.get_by_role("link", name="Judges").click()

    secrets = page.locator("#secret-add")
    secrets.get_by_label("Name").fill("lab-key")
    secrets.get_by_label("Key").fill("sk-browser-typed-key-91ab")
    secrets.get_by_role("button", name="Register the secret").click()
    expect(page.locator("tr[data-secret='lab-key']")).to_contain_text("…91ab")

    local = page.locator("#register-local")
    local.get_by_label("Name").fill("tiny-local")
    fill_common(local, max_tokens="6")
    local.get_by_label("Batch size").fill("2")
    local.get_by_role("button", name="Register the local judge").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Judge tiny-local, version 1")

    page.goto("/judges/")
    endpoint = page.locator("#register-openai")
    endpoint.get_by_label("Name").fill("lab-llm")
    endpoint.get_by_label("Base URL").fill("http://127.0.0.1:9/v1")
    endpoint.get_by_label("Model", exact=True).fill("served")
    endpoint.get_by_label("API key").select_option("lab-key")
    fill_common(endpoint)
    endpoint.get_by_label("Concurrency").fill("2")
    endpoint.get_by_label("Retries").fill("1")
    endpoint.get_by_label("Timeout (seconds)").fill("30")
    endpoint.get_by_role("button", name="Register the endpoint judge").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Judge lab-llm, version 1")
    expect(page.locator("#judge")).to_contain_text("lab-key")
    expect(page.locator("body")).not_to_contain_text("sk-browser-typed-key")

    page.goto("/judges/")
    run_form = page.locator("#register-run")
    run_form.get_by_label("Name").fill("bm25-scores")
    run_form.get_by_label("Run").select_option(str(study.negatives_run_id))
    run_form.get_by_role("button", name="Register the run judge").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Judge bm25-scores, version 1")

    page.goto("/judges/")
    for name in ("tiny-local", "lab-llm", "bm25-scores"):
        expect(page.locator(f"tr[data-judge='{name}']")).to_contain_text("1")
    page.locator("tr[data-judge='tiny-local']").get_by_role("link", name="tiny-local").click()
    page.locator("#edit").get_by_label("Temperature").fill("0.7")
    page.get_by_role("button", name="Save as a new version").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Judge tiny-local, version 2")
    expect(page.locator("ul.messages")).to_contain_text("Judge tiny-local saved as version 2.")
    expect(page.locator("#versions tbody tr")).to_have_count(2)
    assert Judge.objects.get(name="tiny-local", version=2).settings["temperature"] == 0.7
    assert {judge.backend for judge in Judge.objects.all()} == {"local", "openai", "run"}


def test_without_the_endpoint_permission_the_endpoint_form_is_disabled_and_says_why(page):
    make_user("curator", staff=True)
    sign_in(page, "curator")
    page.goto("/judges/")

    endpoint = page.locator("#register-openai fieldset")
    expect(endpoint.get_by_label("Base URL")).to_be_disabled()
    expect(endpoint.get_by_role("button", name="Register the endpoint judge")).to_be_disabled()
    expect(page.locator("#openai-permission")).to_contain_text(ENDPOINT_PERMISSION)
    expect(page.locator("#register-local").get_by_label("Name")).to_be_enabled()
    expect(page.locator("#secrets")).to_contain_text(ENDPOINT_PERMISSION)
