"""Training a dense retriever from the browser and the API: the dashboard's form and
`POST /api/retrievers/train/` share one serializer, queue a "train" job on the "gpu" queue (shown
with its live progress among the dashboard's jobs), refuse bad input beside its field without
queueing anything, and list the registered retrievers so a trained one can be used by name."""

import inspect
import re

import pytest

from jobs.models import Job
from marginalia.celery import app as celery_app
from retrieval.models import Retriever
from retrieval.serializers import TrainingRequestSerializer, request_defaults
from retrieval.services.runs import get_or_create_retriever
from tests.factories import (
    api_client,
    call_json_command,
    make_annotator,
    make_code_word_collection,
    make_relic_collection,
    make_user,
)

pytestmark = pytest.mark.django_db

DASHBOARD = "/dashboard/"
TRAIN_FORM = "/dashboard/train/"
TRAIN_API = "/api/retrievers/train/"


@pytest.fixture
def staff_user():
    return make_user("curator", staff=True)


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture
def staff_api(staff_user):
    return api_client(staff_user)


def form_fields(collection, **changes) -> dict:
    """What a staff member sends from the dashboard's training form: a ticked checkbox sends "on",
    an unticked one (None here) nothing."""
    fields = {
        "collection": collection.pk,
        "name": "code words v1",
        "base_model": "",
        "batch_size": "8",
        "learning_rate": "0.0001",
        "epochs": "3",
        "patience": "2",
        "context_left": "2",
        "context_right": "1",
        "max_steps": "5",
        "seed": "3",
        "asymmetric": "on",
        **changes,
    }
    return {name: value for name, value in fields.items() if value is not None}


def error_beside(page: str, field: str) -> str:
    """The first error message shown after the form field named `field`."""
    return re.search(rf'name="{field}".*?<p class="error">([^<]*)</p>', page, re.S).group(1)


# --- the dashboard form --------------------------------------------------------------------------


def test_staff_queue_a_training_from_the_dashboard_and_see_it_among_the_jobs(
    staff_client, staff_user, django_capture_on_commit_callbacks
):
    collection = make_code_word_collection("code words")

    with django_capture_on_commit_callbacks(execute=False) as sent:
        response = staff_client.post(TRAIN_FORM, form_fields(collection), follow=True)

    job = Job.objects.get()
    assert response.redirect_chain == [(f"{DASHBOARD}#jobs", 302)]
    assert (job.kind, job.queue, job.status, job.created_by, len(sent)) == (
        "train",
        "gpu",
        Job.Status.PENDING,
        staff_user,
        1,
    )
    assert job.parameters == {
        "collection": "code words",
        "name": "code words v1",
        "base_model": None,
        "batch_size": 8,
        "learning_rate": 0.0001,
        "epochs": 3,
        "patience": 2,
        "asymmetric": True,
        "max_steps": 5,
        "seed": 3,
        "context_left": 2,
        "context_right": 1,
    }
    page = response.content.decode()
    assert f'Training of “code words v1” queued as <a href="/jobs/{job.pk}/">job {job.pk}</a> on the gpu queue' in page
    row = re.search(rf'<tr class="job" data-job="{job.pk}" data-finished="0"[^>]*>.*?</tr>', page, re.S).group(0)
    assert "code words v1" in row and "on code words" in row and f'aria-label="Cancel job {job.pk}"' in row
    assert not Retriever.objects.exists()


def test_a_running_training_shows_its_step_loss_and_eta_in_the_jobs_table(staff_client):
    job = Job.objects.create(
        kind="train",
        queue="gpu",
        status=Job.Status.RUNNING,
        progress=0.25,
        message="step 5/20 loss 1.234 eta 42s",
        parameters={"name": "v2", "collection": "c"},
    )

    page = staff_client.get(DASHBOARD).content.decode()

    row = re.search(rf'<tr class="job" data-job="{job.pk}" data-finished="0"[^>]*>.*?</tr>', page, re.S).group(0)
    assert 'style="width: 25%"' in row and "step 5/20 loss 1.234 eta 42s" in row


def test_the_form_starts_from_the_training_defaults(staff_client):
    from retrieval.training import train_retriever

    make_relic_collection(1)
    signature = inspect.signature(train_retriever).parameters
    defaults = request_defaults(TrainingRequestSerializer)

    page = staff_client.get(DASHBOARD).content.decode()

    assert defaults.pop("base_model") == "" and signature["base_model"].default is None  # "": the default model
    assert defaults == {name: signature[name].default for name in defaults}
    form = re.search(r'<form method="post" action="/dashboard/train/".*?</form>', page, re.S).group(0)
    for field in ("batch_size", "epochs", "patience", "context_left", "context_right", "seed"):
        assert f'name="{field}" value="{defaults[field]}"' in form
    assert 'name="max_steps" value=""' in form and 'name="asymmetric">' in form
    assert '<option value="">bundled MiniLM (all-MiniLM-L6-v2)</option>' in form


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"batch_size": "1"}, "batch_size", "must be at least 2 (in-batch negatives), got 1"),
        ({"learning_rate": "fast"}, "learning_rate", "A valid number is required."),
        ({"epochs": "0"}, "epochs", "must be at least 1, got 0"),
        ({"context_left": "-1"}, "context_left", "Ensure this value is greater than or equal to 0."),
        ({"name": ""}, "name", "This field may not be blank."),
        (
            {"base_model": "two towers"},
            "base_model",
            "retriever &#x27;two towers&#x27; has separate query and passage encoders",
        ),
    ],
)
def test_bad_input_is_shown_beside_its_field_and_queues_nothing(
    staff_client, django_capture_on_commit_callbacks, changes, field, message
):
    collection = make_code_word_collection()
    Retriever.objects.create(name="two towers", kind="dense", model_path="/models/p", query_model_path="/models/q")

    with django_capture_on_commit_callbacks(execute=False) as sent:
        response = staff_client.post(TRAIN_FORM, form_fields(collection, **changes))

    assert response.status_code == 400
    page = response.content.decode()
    assert error_beside(page, field).startswith(message)
    assert f'name="{field}" value="{changes[field]}"' in page or field == "base_model"
    assert 'name="seed" value="3"' in page  # the rest of what was sent is kept
    assert (Job.objects.count(), len(sent)) == (0, 0)


def test_a_taken_name_and_a_collection_without_training_queries_are_refused_before_queueing(
    staff_client, django_capture_on_commit_callbacks
):
    collection = make_code_word_collection()
    Retriever.objects.create(name="taken", kind="dense")
    untrainable = make_relic_collection(2)  # its queries have no "train" split

    with django_capture_on_commit_callbacks(execute=False) as sent:
        taken = staff_client.post(TRAIN_FORM, form_fields(collection, name="taken"))
        untrained = staff_client.post(TRAIN_FORM, form_fields(untrainable))

    assert error_beside(taken.content.decode(), "name") == "a retriever named &#x27;taken&#x27; already exists"
    assert error_beside(untrained.content.decode(), "collection").startswith(
        f"no training pairs: collection &#x27;{untrainable.name}&#x27; needs queries in split &#x27;train&#x27;"
    )
    assert (Job.objects.count(), len(sent)) == (0, 0)


def test_a_training_can_continue_a_trained_retriever(staff_client, django_capture_on_commit_callbacks):
    collection = make_code_word_collection()
    Retriever.objects.create(name="code words v1", kind="dense", model_path="/models/code-words-v1/model")
    Retriever.objects.create(name="two towers", kind="dense", model_path="/models/p", query_model_path="/models/q")

    page = staff_client.get(DASHBOARD).content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        staff_client.post(
            TRAIN_FORM, form_fields(collection, name="code words v2", base_model="code words v1", asymmetric=None)
        )

    form = re.search(r'<form method="post" action="/dashboard/train/".*?</form>', page, re.S).group(0)
    assert '<option value="code words v1">code words v1</option>' in form
    assert '<option value="two towers">' not in form  # one model cannot seed two encoders
    job = Job.objects.get()
    assert (job.parameters["base_model"], job.parameters["asymmetric"]) == ("/models/code-words-v1/model", False)


# --- who may train --------------------------------------------------------------------------------


def test_only_staff_may_queue_a_training(client, django_capture_on_commit_callbacks):
    collection = make_code_word_collection()
    annotator = make_annotator()
    anonymous_api, annotator_api = api_client(), api_client(annotator)

    with django_capture_on_commit_callbacks(execute=False) as sent:
        signed_out = client.post(TRAIN_FORM, form_fields(collection))
        client.force_login(annotator)
        as_annotator = client.post(TRAIN_FORM, form_fields(collection))
        api_answers = [
            api.post(TRAIN_API, {"collection": collection.pk, "name": "x"}, format="json").status_code
            for api in (anonymous_api, annotator_api)
        ]

    assert signed_out.status_code == 302 and signed_out["Location"].startswith("/accounts/login/")
    assert as_annotator.status_code == 403
    assert api_answers == [403, 403]
    assert [api_client().get("/api/retrievers/").status_code, annotator_api.get("/api/retrievers/").status_code] == [
        403,
        403,
    ]
    assert (Job.objects.count(), len(sent)) == (0, 0)


# --- the API -------------------------------------------------------------------------------------


def test_the_api_queues_a_training_and_answers_202_with_its_job(staff_api, django_capture_on_commit_callbacks):
    collection = make_code_word_collection("code words")

    with django_capture_on_commit_callbacks(execute=False) as sent:
        response = staff_api.post(
            TRAIN_API, {"collection": collection.pk, "name": "api-trained", "batch_size": 6}, format="json"
        )

    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.queue, response.json()["status"], len(sent)) == ("train", "gpu", "pending", 1)
    assert job.parameters == {
        "collection": "code words",
        "name": "api-trained",
        "base_model": None,
        "batch_size": 6,
        "learning_rate": 2e-5,
        "epochs": 1,
        "patience": 1,
        "asymmetric": False,
        "max_steps": None,
        "seed": 0,
        "context_left": 4,
        "context_right": 4,
    }


def test_the_api_names_the_bad_field_and_queues_nothing(staff_api, django_capture_on_commit_callbacks):
    collection = make_code_word_collection()

    with django_capture_on_commit_callbacks(execute=False) as sent:
        small_batch = staff_api.post(
            TRAIN_API, {"collection": collection.pk, "name": "x", "batch_size": 1}, format="json"
        )
        no_collection = staff_api.post(TRAIN_API, {"collection": 999, "name": "x"}, format="json")

    assert (small_batch.status_code, small_batch.json()) == (
        400,
        {"batch_size": ["must be at least 2 (in-batch negatives), got 1"]},
    )
    assert no_collection.status_code == 400 and list(no_collection.json()) == ["collection"]
    assert (Job.objects.count(), len(sent)) == (0, 0)


def test_registered_retrievers_are_listed_on_the_dashboard_and_the_api(staff_client, staff_api, settings):
    collection = make_code_word_collection("code words")
    bm25 = get_or_create_retriever("bm25")
    default_dense = get_or_create_retriever("dense")
    job = Job.objects.create(kind="train", queue="gpu", status=Job.Status.SUCCEEDED)
    trained = Retriever.objects.create(
        name="code words v1",
        kind="dense",
        model_path=f"{settings.MARGINALIA_DATA_DIR}/models/v1/model",
        trained_on=collection,
        training_job=job,
    )

    page = staff_client.get(DASHBOARD).content.decode()
    listed = {row["name"]: row for row in staff_api.get("/api/retrievers/").json()["results"]}

    rows = {
        pk: re.search(rf'<tr data-retriever="{pk}">(.*?)</tr>', page, re.S).group(1)
        for pk in (bm25.pk, default_dense.pk, trained.pk)
    }
    assert "k1=0.5 b=0.9" in rows[bm25.pk]
    assert "bundled MiniLM" in rows[default_dense.pk]
    # The page names the model inside the data folder, never the server's folders above it.
    assert ">models/v1/model<" in rows[trained.pk] and "code words" in rows[trained.pk]
    assert str(settings.MARGINALIA_DATA_DIR) not in page
    assert f'href="/jobs/{job.pk}/"' in rows[trained.pk]
    assert '<datalist id="dense-retrievers">' in page and '<option value="code words v1">' in page
    assert set(listed) == {bm25.name, default_dense.name, "code words v1"}
    assert {
        key: listed["code words v1"][key]
        for key in ("kind", "model_path", "trained_on", "trained_on_name", "training_job")
    } == {
        "kind": "dense",
        "model_path": trained.model_path,  # the API keeps the full path
        "trained_on": collection.pk,
        "trained_on_name": "code words",
        "training_job": job.pk,
    }
    assert staff_api.get(f"/api/retrievers/{trained.pk}/").json()["name"] == "code words v1"


# --- end to end, on a worker in this process ---------------------------------------------------


def test_a_training_queued_through_the_api_registers_a_retriever_that_retrieve_can_use(
    staff_api, data_dir, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    collection = make_code_word_collection()

    with django_capture_on_commit_callbacks(execute=True):
        response = staff_api.post(
            TRAIN_API, {"collection": collection.pk, "name": "tiny", "batch_size": 6, "max_steps": 2}, format="json"
        )

    job = Job.objects.get(pk=response.json()["id"])
    assert (job.status, job.progress, job.result["steps"]) == (Job.Status.SUCCEEDED, 1.0, 2)
    trained = Retriever.objects.get(name="tiny")
    assert (trained.training_job, trained.trained_on) == (job, collection)
    run = call_json_command("retrieve", "--collection", collection.name, "--retriever", "dense", "--model", "tiny")
    assert run["queries"] == collection.queries.count()


def test_a_name_already_being_trained_is_refused_until_that_training_ends(
    staff_api, django_capture_on_commit_callbacks
):
    collection = make_code_word_collection()
    request = {"collection": collection.pk, "name": "v1", "batch_size": 6}

    with django_capture_on_commit_callbacks(execute=False):
        first = staff_api.post(TRAIN_API, request, format="json")
        again = staff_api.post(TRAIN_API, request, format="json")
        Job.objects.filter(pk=first.json()["id"]).update(status=Job.Status.FAILED)
        after_failure = staff_api.post(TRAIN_API, request, format="json")

    assert (first.status_code, after_failure.status_code) == (202, 202)
    assert again.json() == {
        "name": [f"a training of a retriever named 'v1' is already queued (job {first.json()['id']})"]
    }
