"""Training a dense retriever on a study's judgments from the staff study page (and its API
twin): it queues a "train" job with the study's settings and context sizes, exactly as the
`train_from_study` command does, whose worker builds the pairs (the request only counts them and
loads no model); bad input is refused beside its field; staff only."""

import re

import pytest

from annotation import tasks
from annotation.services.study_training import study_training_arguments
from jobs.models import Job
from retrieval.models import Retriever
from tests.factories import (
    add_judgment,
    api_client,
    call_json_command,
    make_annotator,
    make_label_study,
    make_proxy_study,
    make_user,
)

pytestmark = pytest.mark.django_db

HYPERPARAMETERS = {
    "batch_size": "4",
    "learning_rate": "0.0001",
    "epochs": "2",
    "patience": "1",
    "max_steps": "",
    "seed": "5",
    "base_model": "",
}


def train_url(study) -> str:
    return f"/studies/{study.pk}/train/"


@pytest.fixture
def judged_study():
    """Six items with a gold; two annotators judged the first, one picking a distractor."""
    study = make_proxy_study(gold_positions=[0, 1, 2, 0, 1, 2], candidates=3)
    study.context_left, study.context_right = 2, 0
    study.save()
    first = study.items.order_by("position").first()
    add_judgment(first, make_annotator(), 0)
    add_judgment(first, make_annotator(), 2)
    return study


@pytest.fixture
def sent_tasks(monkeypatch):
    """The training tasks dispatched: (args, queue) of each, recorded instead of sent."""
    sent = []
    monkeypatch.setattr(
        tasks.train_on_study,
        "apply_async",
        lambda args=None, kwargs=None, **options: sent.append((args, options["queue"])),
    )
    return sent


def test_staff_queue_a_training_on_the_studys_pairs(
    staff_client, judged_study, sent_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            train_url(judged_study),
            {"name": "from experts", "validation_share": "0.34", **HYPERPARAMETERS},
            follow=True,
        )

    job = Job.objects.get()
    assert response.redirect_chain == [("/dashboard/#jobs", 302)]
    assert (
        f"Training of “from experts” on 6 pairs from the judgments of “{judged_study.name}” queued as "
        f'<a href="/jobs/{job.pk}/">job {job.pk}</a> on the gpu queue.' in (response.content.decode())
    )
    assert (job.kind, job.queue, job.status) == ("train", "gpu", Job.Status.PENDING)
    settings = {
        "name": "from experts",
        "base_model": None,
        "batch_size": 4,
        "learning_rate": 0.0001,
        "epochs": 2,
        "patience": 1,
        "asymmetric": False,
        "max_steps": None,
        "seed": 5,
        "context_left": 2,
        "context_right": 0,
    }
    assert job.parameters == {
        "collection": judged_study.collection.name,
        **settings,
        "pairs": 6,
        "study": judged_study.pk,
    }
    [(args, queue)] = sent_tasks
    assert (list(args), queue) == ([job.pk, judged_study.pk, settings, 0.34], "gpu")
    built = study_training_arguments(judged_study, validation_share=0.34, **settings)  # what the worker trains on
    assert (len(built["pairs"]), len(built["validation_pairs"])) == (4, 2)


def test_the_page_and_the_command_prepare_the_same_training(
    staff_client, judged_study, sent_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(
            train_url(judged_study), {"name": "from the page", "validation_share": "0.34", **HYPERPARAMETERS}
        )
        summary = call_json_command(
            "train_from_study",
            judged_study.pk,
            "--name",
            "from the command",
            "--async",
            "--validation-share",
            0.34,
            "--batch-size",
            4,
            "--lr",
            0.0001,
            "--epochs",
            2,
            "--seed",
            5,
        )

    page_job, command_job = Job.objects.order_by("pk")
    assert summary == {"job_id": command_job.pk, "status": "pending", "queue": "gpu"}
    assert {**page_job.parameters, "name": None} == {**command_job.parameters, "name": None}
    [page_args, command_args] = [args for args, _ in sent_tasks]
    assert page_args[1] == command_args[1] and page_args[3] == command_args[3] == 0.34
    assert {**page_args[2], "name": None} == {**command_args[2], "name": None}  # the same training


def test_the_form_is_on_proxy_study_pages_with_the_training_defaults(staff_client, judged_study):
    page = staff_client.get(f"/studies/{judged_study.pk}/").content.decode()
    label_page = staff_client.get(f"/studies/{make_label_study().pk}/").content.decode()

    form = re.search(rf'<form method="post" action="{train_url(judged_study)}".*?</form>', page, re.S).group(0)
    assert 'name="batch_size" value="32"' in form and 'name="validation_share" value="0.1"' in form
    assert 'name="context_left"' not in form  # queries read as the annotators saw them
    assert "/train/" not in label_page


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"name": "taken"}, "name", "a retriever named &#x27;taken&#x27; already exists"),
        ({"validation_share": "1.5"}, "validation_share", "must be in [0, 1), got 1.5"),
        ({"batch_size": "1"}, "batch_size", "must be at least 2 (in-batch negatives), got 1"),
    ],
)
def test_bad_input_is_shown_beside_its_field_and_queues_nothing(
    staff_client, judged_study, sent_tasks, django_capture_on_commit_callbacks, changes, field, message
):
    Retriever.objects.create(name="taken", kind="dense")

    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(train_url(judged_study), {"name": "fresh", **HYPERPARAMETERS, **changes})

    assert response.status_code == 400
    page = response.content.decode()
    assert re.search(rf'name="{field}".*?<p class="error">{re.escape(message)}</p>', page, re.S)
    assert '<details class="card training" id="train" open>' in page
    assert (Job.objects.count(), sent_tasks) == (0, [])


def test_a_study_without_usable_judgments_says_so_and_queues_nothing(
    staff_client, sent_tasks, django_capture_on_commit_callbacks
):
    study = make_proxy_study(gold_positions=[0, 1])
    for item in study.items.all():
        item.candidates.update(is_gold=False)
    add_judgment(study.items.first(), make_annotator(), 0)
    add_judgment(study.items.first(), make_annotator(), 1)  # a split vote: no positive either

    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(train_url(study), {"name": "nothing to learn", **HYPERPARAMETERS})

    assert response.status_code == 400
    assert f"study {study.pk} gives no training pairs" in response.content.decode()
    assert (Job.objects.count(), sent_tasks) == (0, [])


def test_only_staff_may_train_on_a_study(client, judged_study):
    signed_out = client.post(train_url(judged_study), {"name": "x"})
    annotator = make_annotator()
    client.force_login(annotator)
    as_annotator = client.post(train_url(judged_study), {"name": "x"})
    annotator_api = api_client(annotator)

    assert signed_out.status_code == 302 and signed_out["Location"].startswith("/accounts/login/")
    assert as_annotator.status_code == 403
    assert annotator_api.post(f"/api/studies/{judged_study.pk}/train/", {"name": "x"}, format="json").status_code == 403
    assert not Job.objects.exists()


def test_the_api_twin_queues_the_same_training(judged_study, sent_tasks, django_capture_on_commit_callbacks):
    api = api_client(make_user(staff=True))

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"/api/studies/{judged_study.pk}/train/", {"name": "via api", "batch_size": 4}, format="json"
        )
        again = api.post(f"/api/studies/{judged_study.pk}/train/", {"name": "via api"}, format="json")

    assert response.status_code == 202
    job = Job.objects.get()
    assert (response.json()["id"], job.kind, job.queue) == (job.pk, "train", "gpu")
    assert (job.parameters["pairs"], job.parameters["context_left"]) == (6, 2)  # 10% of 6 items: none held out
    assert (again.status_code, again.json()) == (
        400,
        {"name": [f"a training of a retriever named 'via api' is already queued (job {job.pk})"]},
    )
    assert len(sent_tasks) == 1
