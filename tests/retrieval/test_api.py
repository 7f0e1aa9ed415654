"""The staff retrieval API: collections with their sizes, queries by collection, runs started
through a worker queue and read back with their metrics, jobs that report progress and can be
cancelled, and TREC exports of runs and qrels."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.tasks import sweep_stale_jobs
from marginalia.celery import app as celery_app
from retrieval.metrics import evaluate_run
from retrieval.models import Hit, Retriever, Run
from retrieval.selectors import trec_run_lines
from tests.factories import (
    api_client,
    make_annotator,
    make_collection,
    make_relic_collection,
    make_scored_run,
    make_user,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    return api_client(make_user("researcher", staff=True))


@pytest.fixture
def eager_worker(monkeypatch):
    """Tasks run in-process as soon as they are sent, as a worker would run them."""
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)


def start_bm25_run(client, collection, **fields):
    return client.post("/api/runs/", {"collection": collection.pk, "retriever": "bm25", **fields}, format="json")


@pytest.mark.parametrize("path", ["/api/collections/", "/api/queries/", "/api/runs/", "/api/jobs/"])
def test_only_staff_reach_the_retrieval_api(path):
    anonymous = api_client()
    annotator = api_client(make_annotator())
    assert anonymous.get(path).status_code == 403
    assert annotator.get(path).status_code == 403


def test_collections_list_their_sizes(staff):
    collection = make_relic_collection(3, book_sentences=40)
    make_scored_run(collection, {"quote0": {"book:10:1": 1.0}})
    make_collection("empty")

    listed = {row["name"]: row for row in staff.get("/api/collections/").json()["results"]}

    sizes = ("documents", "passages", "queries", "qrels", "runs")
    assert {key: listed[collection.name][key] for key in sizes} == {
        "documents": 1,
        "passages": 40,
        "queries": 3,
        "qrels": 3,
        "runs": 1,
    }
    assert (listed["empty"]["documents"], listed["empty"]["passages"], listed["empty"]["queries"]) == (0, 0, 0)
    detail = staff.get(f"/api/collections/{collection.pk}/").json()
    assert (detail["kind"], detail["queries"]) == ("relic", 3)


def test_queries_are_filtered_by_collection_and_carry_their_context(staff):
    wanted = make_relic_collection(2, name="wanted")
    make_relic_collection(3, name="other")

    rows = staff.get(f"/api/queries/?collection={wanted.pk}").json()["results"]

    assert [row["external_id"] for row in rows] == ["quote0", "quote1"]
    assert rows[0]["left_context"][0] == "Critic 0 writes remark 0 before the quotation."
    assert rows[0]["quote_length"] == 1
    assert staff.get("/api/queries/?collection=abc").json()["results"] == []


def test_a_run_started_through_the_api_is_queued_then_reported_with_metrics(
    staff, eager_worker, django_capture_on_commit_callbacks
):
    collection = make_relic_collection(4)

    with django_capture_on_commit_callbacks(execute=True):
        response = start_bm25_run(staff, collection, k1=0.5, b=0.9, context_left=2, context_right=1, depth=5)

    assert response.status_code == 202
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.parameters["context_left"], run.parameters["context_right"], run.parameters["depth"]) == (2, 1, 5)
    assert run.retriever.parameters == {"k1": 0.5, "b": 0.9}
    job = staff.get(f"/api/jobs/{run.job_id}/").json()
    assert (job["kind"], job["queue"], job["status"], job["progress"]) == ("retrieve", "cpu", "succeeded", 1.0)
    assert job["created_by"] == "researcher"
    detail = staff.get(f"/api/runs/{run.pk}/").json()
    assert detail["status"] == "done"
    assert detail["retriever"]["kind"] == "bm25"
    assert detail["evaluation"]["metrics"] == evaluate_run(run)["metrics"]
    assert detail["evaluation"]["queries"] == 4
    assert Hit.objects.filter(run=run).count() == 4 * 5


def test_a_dense_run_goes_to_the_gpu_queue(staff, django_capture_on_commit_callbacks):
    collection = make_relic_collection(1)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = staff.post("/api/runs/", {"collection": collection.pk, "retriever": "dense"}, format="json")

    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["job"])
    assert (job.queue, job.status) == ("gpu", Job.Status.PENDING)
    assert len(callbacks) == 1  # sent to the broker only once the transaction commits
    assert Run.objects.get(pk=response.json()["id"]).retriever.kind == Retriever.Kind.DENSE


@pytest.mark.parametrize(
    ("fields", "field_in_error"),
    [
        ({"k1": -1}, "k1"),
        ({"b": 1.5}, "b"),
        ({"retriever": "splade"}, "retriever"),
        ({"depth": 0}, "depth"),
        ({"context_left": -1}, "context_left"),
        ({"collection": 999999}, "collection"),
    ],
)
def test_a_bad_run_request_names_the_field_and_creates_nothing(staff, fields, field_in_error):
    collection = make_relic_collection(1)

    response = staff.post("/api/runs/", {"collection": collection.pk, "retriever": "bm25", **fields}, format="json")

    assert response.status_code == 400
    assert field_in_error in response.json()
    assert (Run.objects.count(), Job.objects.count()) == (0, 0)


def test_a_pending_job_can_be_cancelled_and_a_finished_one_cannot(staff, django_capture_on_commit_callbacks):
    collection = make_relic_collection(1)
    with django_capture_on_commit_callbacks(execute=False):
        job_id = start_bm25_run(staff, collection).json()["job"]

    cancelled = staff.post(f"/api/jobs/{job_id}/cancel/")
    again = staff.post(f"/api/jobs/{job_id}/cancel/")

    assert cancelled.status_code == 202
    assert (cancelled.json()["status"], cancelled.json()["is_finished"]) == ("cancelled", True)
    assert again.status_code == 409
    assert [row["id"] for row in staff.get("/api/jobs/").json()["results"]] == [job_id]


def test_a_run_exports_as_a_trec_run_file(staff):
    collection = make_relic_collection(2)
    run = make_scored_run(collection, {"quote0": {"book:10:1": 2.5, "book:11:1": 1.25}, "quote1": {"book:20:1": 0.5}})

    response = staff.get(f"/api/runs/{run.pk}/trec/", HTTP_ACCEPT="text/plain")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines == list(trec_run_lines(run))
    assert lines[0] == f"quote0 Q0 book:10:1 1 2.5 {run.tag}"


def test_a_collection_exports_its_qrels_in_trec_format(staff):
    collection = make_relic_collection(2)

    response = staff.get(f"/api/collections/{collection.pk}/qrels/")

    assert response.status_code == 200
    assert b"".join(response.streaming_content).decode() == "quote0 0 book:10:1 1\nquote1 0 book:20:1 1\n"


def test_the_openapi_schema_describes_the_retrieval_endpoints(staff):
    schema = staff.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    for path in (
        "/api/collections/",
        "/api/collections/{id}/qrels/",
        "/api/queries/",
        "/api/runs/",
        "/api/runs/{id}/trec/",
        "/api/jobs/{id}/",
        "/api/jobs/{id}/cancel/",
    ):
        assert path in schema["paths"]
    assert "post" in schema["paths"]["/api/runs/"]


def test_the_periodic_sweep_fails_a_running_job_whose_worker_went_silent(staff, settings):
    settings.MARGINALIA_STALE_JOB_MINUTES = 30
    silent = Job.objects.create(
        kind="train", queue="gpu", status=Job.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(minutes=31)
    )
    lively = Job.objects.create(
        kind="retrieve", queue="cpu", status=Job.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(minutes=5)
    )

    sweep_stale_jobs.apply()  # what Celery beat runs every MARGINALIA_SWEEP_SECONDS

    statuses = {row["id"]: row["status"] for row in staff.get("/api/jobs/").json()["results"]}

    assert statuses == {silent.pk: "failed", lively.pk: "running"}
    assert "stopped reporting" in Job.objects.get(pk=silent.pk).error
