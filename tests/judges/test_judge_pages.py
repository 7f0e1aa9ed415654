"""Judges in the browser's pages (issue 21.2): every install has the embedded judge the panel
preselects; staff register, edit and version judges with a form per backend (no JSON), the
endpoint form needs judges.manage_judge_endpoints and says so; judge secrets are managed there
and never shown back; the study's panel shows a judge at work; and asking reports progress
answer by answer."""

import re

import pytest

from jobs.models import Job
from jobs.services import create_job, execute
from judges.asking import judge_study
from judges.models import Judge, JudgeAnswer, JudgeSecret
from judges.secrets import ENDPOINT_PERMISSION, store_secret
from judges.services import EMBEDDED_JUDGE, embedded_judge, get_judge, register_judge, start_judging
from retrieval.models import Run
from tests.factories import grant, make_annotator, make_label_study, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db

KEY = "sk-typed-into-the-form-7f3a"


@pytest.fixture
def manager(client):
    """A staff member who may point judges at endpoints."""
    client.force_login(grant(make_user("lead", staff=True), ENDPOINT_PERMISSION))
    return client


def page_text(response) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", response.content.decode()).split())


# --- the embedded judge -----------------------------------------------------------------------


def test_a_fresh_database_has_the_embedded_judge_and_the_panel_starts_it(
    staff_client, broker, django_capture_on_commit_callbacks
):
    """The test database is built by the migrations alone: nothing registered the judge."""
    migrated = Judge.objects.get(name=EMBEDDED_JUDGE)
    assert (migrated.version, migrated.backend) == (1, "local")
    assert embedded_judge() == migrated  # the migration's settings are the service's: no version 2
    study = make_relic_proxy_study(2)

    panel = staff_client.get(f"/studies/{study.pk}/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(f"/studies/{study.pk}/judges/run/", {"judge": EMBEDDED_JUDGE, "samples": 1})

    assert f'<option value="{EMBEDDED_JUDGE}" selected>' in panel
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/"
    job = Job.objects.get(kind="judge")
    assert (job.queue, job.parameters["judge"], job.parameters["version"]) == ("gpu", EMBEDDED_JUDGE, 1)
    assert broker.llen("gpu") == 1


def test_a_deleted_embedded_judge_is_registered_again_when_asked_for():
    Judge.objects.filter(name=EMBEDDED_JUDGE).delete()
    study = make_relic_proxy_study(1)

    assert get_judge(EMBEDDED_JUDGE).version == 1
    assert start_judging(study, get_judge(None)).parameters["judge"] == EMBEDDED_JUDGE


# --- registering and versioning -----------------------------------------------------------------


def test_staff_register_a_local_judge_by_form_and_each_edit_makes_a_new_version(staff_client):
    response = staff_client.post(
        "/judges/",
        {
            "backend": "local",
            "local-name": "tiny-local",
            "local-model": "",
            "local-gguf_file": "",
            "local-temperature": "0",
            "local-seed": "0",
            "local-max_tokens": "6",
            "local-batch_size": "2",
        },
    )
    first = Judge.objects.get(name="tiny-local")
    assert response.status_code == 302 and response["Location"] == f"/judges/{first.pk}/"
    assert (first.version, first.backend, first.settings["batch_size"], first.settings["concurrency"]) == (
        1,
        "local",
        2,
        4,
    )

    edit = {"local-model": "", "local-gguf_file": "", "local-temperature": "0.7", "local-seed": "3"}
    edit |= {"local-max_tokens": "6", "local-batch_size": "2"}
    edited = staff_client.post(f"/judges/{first.pk}/", edit, follow=True)
    again = staff_client.post(f"/judges/{first.pk}/", edit, follow=True)

    second = Judge.objects.get(name="tiny-local", version=2)
    assert (second.settings["temperature"], second.settings["seed"]) == (0.7, 3)
    assert first.settings == Judge.objects.get(pk=first.pk).settings  # version 1 is left as it was
    assert "Judge tiny-local saved as version 2." in page_text(edited)
    assert "already has these settings: version 2 stays" in page_text(again)
    assert Judge.objects.filter(name="tiny-local").count() == 2
    versions = page_text(staff_client.get(f"/judges/{second.pk}/"))
    assert "v2 (this page)" in versions and "v1" in versions


def test_a_run_judge_is_chosen_among_finished_runs_and_bad_input_shows_under_its_field(staff_client):
    study = make_relic_proxy_study(1)
    running = Run.objects.create(collection=study.collection, retriever=study.negatives_run.retriever)
    page = staff_client.get("/judges/").content.decode()
    assert f'<option value="{study.negatives_run_id}">' in page
    assert f'<option value="{running.pk}">' not in page

    refused = staff_client.post("/judges/", {"backend": "run", "run-name": " ", "run-run": str(running.pk)})

    assert refused.status_code == 400 and not Judge.objects.filter(backend="run").exists()
    assert 'id="id_run-name"' in refused.content.decode() and "This field is required." in page_text(refused)
    assert "Select a valid choice" in page_text(refused)
    created = staff_client.post("/judges/", {"backend": "run", "run-name": "bm25", "run-run": study.negatives_run_id})
    assert created.status_code == 302 and Judge.objects.get(name="bm25").settings["run"] == study.negatives_run_id


def openai_form(**changes) -> dict:
    values = {
        "backend": "openai",
        "openai-name": "gpt",
        "openai-base_url": "http://127.0.0.1:9/v1",
        "openai-model": "served",
        "openai-api_key_secret": "",
        "openai-temperature": "0",
        "openai-seed": "0",
        "openai-max_tokens": "8",
        "openai-concurrency": "4",
        "openai-retries": "4",
        "openai-timeout": "60",
    }
    return values | {f"openai-{key}": value for key, value in changes.items()}


def test_staff_without_the_permission_see_the_endpoint_form_disabled_with_the_reason_and_cannot_post_it(
    staff_client,
):
    html = staff_client.get("/judges/").content.decode()
    form = html[html.index('id="register-openai"') : html.index("</form>", html.index('id="register-openai"'))]

    assert 'disabled aria-describedby="openai-permission"' in form
    assert f"needs the permission {ENDPOINT_PERMISSION}" in form
    assert staff_client.post("/judges/", openai_form()).status_code == 403
    assert not Judge.objects.filter(name="gpt").exists()
    secrets = html[html.index('id="secrets"') :]
    assert "Register a judge secret" not in secrets and ENDPOINT_PERMISSION in secrets
    assert staff_client.post("/judges/secrets/", {"name": "k", "value": KEY}).status_code == 403
    assert not JudgeSecret.objects.exists()


def test_an_endpoint_judge_names_a_secret_registered_on_the_page_which_is_never_shown_again(manager):
    added = manager.post("/judges/secrets/", {"name": "lab-key", "value": KEY}, follow=True)
    assert "Judge secret lab-key registered (…7f3a)." in page_text(added)

    refused = manager.post("/judges/", openai_form(base_url="http://169.254.169.254/v1"))
    created = manager.post("/judges/", openai_form(api_key_secret="lab-key"), follow=True)

    assert refused.status_code == 400
    base_url_field = page_text(refused).split("Base URL", 1)[1]
    assert "metadata" in base_url_field.split("Model", 1)[0]
    judge = Judge.objects.get(name="gpt")
    assert (judge.backend, judge.queue, judge.settings["api_key_secret"]) == ("openai", "long", "lab-key")
    pages = [created, manager.get("/judges/"), manager.get(f"/judges/{judge.pk}/")]
    assert all(KEY not in page.content.decode() for page in pages)
    assert "lab-key" in page_text(manager.get("/judges/")).split("Judge secrets", 1)[1]

    manager.post(f"/judges/secrets/{JudgeSecret.objects.get().pk}/", {"value": "sk-rotated-by-the-form-0002"})
    assert JudgeSecret.objects.get().hint == "…0002"
    manager.post(f"/judges/secrets/{JudgeSecret.objects.get().pk}/delete/")
    assert not JudgeSecret.objects.exists()


def test_editing_an_endpoint_judge_keeps_settings_the_form_does_not_show(manager):
    store_secret("lab-key", KEY)
    judge = register_judge("gpt", "openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m", "batch_size": 2})
    manager.post(f"/judges/{judge.pk}/", openai_form(api_key_secret="lab-key"))

    revised = Judge.objects.get(name="gpt", version=2)
    assert revised.settings["batch_size"] == 2 and revised.settings["api_key_secret"] == "lab-key"


# --- the study's panel and per-answer progress ---------------------------------------------------


def test_the_panel_shows_each_judge_at_work_with_its_progress_and_job_page(staff_client):
    study = make_relic_proxy_study(2)
    job = create_job("judge", "long", {"study": study.pk, "judge": "gpt", "version": 3, "samples": 1})
    Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING, progress=0.25, message="1/4 answers from gpt v3")
    other = make_relic_proxy_study(1)
    create_job("judge", "long", {"study": other.pk, "judge": "elsewhere", "version": 1, "samples": 1})

    html = staff_client.get(f"/studies/{study.pk}/").content.decode()
    panel = html[html.index('id="judges"') : html.index("</section>", html.index('id="judges"'))]

    assert f'data-job="{job.pk}" data-finished="0" data-refresh="judges"' in panel
    assert f'href="/jobs/{job.pk}/"' in panel and "1/4 answers from gpt v3" in panel
    assert 'aria-valuenow="25"' in panel and "elsewhere" not in panel
    assert "/static/jobs/jobs.js" in html


def test_asking_reports_progress_after_every_answer_not_every_batch(chat_server):
    server = chat_server("--answer", "SCORE: 1")
    study = make_label_study(items=5)
    judge = register_judge("endpoint", "openai", {"base_url": server.base_url, "model": "m", "batch_size": 4})
    reports = []

    judge_study(study, judge, progress=lambda fraction, message: reports.append(message))

    assert reports[0].startswith("0/5 answers from endpoint v1")
    assert reports[1:] == [f"{n}/5 answers from endpoint v1" for n in range(1, 6)]


def test_a_judge_cancelled_mid_batch_keeps_the_answers_that_arrived(chat_server):
    server = chat_server("--answer", "SCORE: 1", "--delay", "0.2")
    study = make_label_study(items=6)
    judge = register_judge("endpoint", "openai", {"base_url": server.base_url, "model": "m", "concurrency": 1})
    job = create_job("judge", "long", {"study": study.pk})

    def cancel_after_two(progress):
        def report(fraction, message):
            progress(fraction, message)
            if message.startswith("2/"):
                Job.objects.filter(pk=job.pk).update(cancel_requested=True)

        return judge_study(study, judge, progress=report)

    result = execute(job.pk, cancel_after_two)

    assert result == {"cancelled": True} and Job.objects.get(pk=job.pk).status == "cancelled"
    # One batch of 6 (batch_size 8): the third answer's report sees the cancellation; the three
    # answers that arrived are stored; the one request in flight (concurrency 1) ends unread and
    # the other two are never sent.
    assert JudgeAnswer.objects.filter(judge=judge).count() == 3
    assert len(server.requests()) == 4


def test_annotators_reach_no_judge_page(client):
    judge = register_judge("tiny", "local", {})
    client.force_login(make_annotator("ann"))
    for path in ("/judges/", f"/judges/{judge.pk}/"):
        assert client.get(path).status_code == 403
        assert client.post(path, {"backend": "local", "local-name": "x"}).status_code == 403
    assert not Judge.objects.filter(name="x").exists()
