"""Judges that call an endpoint, attacked as the attack run did (issue 20, findings 1 and 2),
against a real listener process on 127.0.0.1 (tests/judges/openai_server.py) that logs what
reaches it, the Authorization header included:

1. a judge naming a worker environment variable as its key (DATABASE_URL, REDIS_URL,
   DJANGO_SECRET_KEY) never sends it: registration needs a permission of its own and refuses
   the variable, and a judge stored before that check is refused when it runs, before any
   request;
2. a judge's endpoint passes the outbound guard: the 24 base URLs are refused at registration,
   a judge stored with a loopback one is refused at run time before connecting, redirects are
   not followed, and what an endpoint says besides an answer (a page that is no chat
   completion, a 4xx's body) reaches neither the judge answers nor the job's error.

Then the routes that manage endpoints and judge secrets, swept as a staff account without the
permission, an annotator (session and token) and anonymous: refused, nothing written, no key
shown. Each run-time case runs the job through the API with Celery eager (no worker)."""

import io
import re

import pytest
from django.contrib import admin
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from jobs.models import Job
from judges.asking import judge_study
from judges.backends import MAX_ANSWER_CHARACTERS, EndpointUnavailable
from judges.models import Judge, JudgeAnswer, JudgeSecret
from judges.secrets import ENDPOINT_PERMISSION, store_secret
from tests.factories import api_client, call_json_command, grant, make_annotator, make_label_study, make_user
from tests.outbound.test_guard import REFUSED_BASE_URLS

pytestmark = pytest.mark.django_db

KEY = "sk-registered-key-0123456789abcdef"


@pytest.fixture
def nothing_allowed(settings):
    """The outbound guard as deployed without a local model server: 127.0.0.1 is refused."""
    settings.MARGINALIA_OUTBOUND_ALLOW = []


def manager():
    return grant(make_user("endpoint-manager", staff=True), ENDPOINT_PERMISSION)


def stored_judge(name: str, **settings) -> Judge:
    """A judge as it sits in the table when it was registered before these checks existed."""
    return Judge.objects.create(
        name=name, backend="openai", settings={"model": "m", "retries": 1, "concurrency": 1, **settings}
    )


def run_by_api(study, judge_name: str, capture) -> Job:
    staff = api_client(make_user(staff=True))
    with capture(execute=True):
        response = staff.post(f"/api/studies/{study.pk}/judge/", {"judge": judge_name}, format="json")
    assert response.status_code == 202, response.content
    return Job.objects.get(pk=response.json()["job"]["id"])


# --- finding 1: secrets never leave by configuration ------------------------------------------------


@pytest.mark.parametrize("variable", ["DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY"])
def test_finding_1_a_judge_cannot_send_a_worker_variable_to_a_listener(
    variable, chat_server, monkeypatch, settings, eager_celery, django_capture_on_commit_callbacks
):
    monkeypatch.setenv(variable, f"{variable}-VALUE-THAT-MUST-NOT-LEAVE")
    settings.MARGINALIA_JUDGE_KEY_ENVS = [variable]  # even a deployment that lists it cannot open it
    server = chat_server("--answer", "SCORE: 1")
    study = make_label_study(items=2)
    judge = {
        "name": "exfiltrate",
        "backend": "openai",
        "settings": {"base_url": server.base_url, "model": "m", "api_key_env": variable},
    }

    as_written = api_client(make_user("staff-without-model-permissions", staff=True)).post(
        "/api/judges/", judge, format="json"
    )
    with_permission = api_client(manager()).post("/api/judges/", judge, format="json")
    stored_judge("exfiltrate", base_url=server.base_url, api_key_env=variable)
    job = run_by_api(study, "exfiltrate", django_capture_on_commit_callbacks)

    assert as_written.status_code == 403
    assert with_permission.status_code == 400 and "settings.api_key_env" in with_permission.json()
    assert Judge.objects.filter(name="exfiltrate").count() == 1  # only the one written past registration
    job.refresh_from_db()
    assert job.status == "failed"
    assert f"judges may not read environment variable {variable}" in job.error.splitlines()[0]
    assert "VALUE-THAT-MUST-NOT-LEAVE" not in job.error
    assert server.requests() == [] and not JudgeAnswer.objects.exists()


def test_a_judge_naming_a_secret_that_was_deleted_is_refused_in_one_line_before_asking(chat_server):
    server = chat_server("--answer", "SCORE: 1")
    store_secret("gone", KEY)
    stored_judge("orphan", base_url=server.base_url, api_key_secret="gone")
    JudgeSecret.objects.all().delete()

    with pytest.raises(Exception, match="no judge secret named 'gone'"):
        judge_study(make_label_study(items=1), Judge.objects.get(name="orphan"))
    assert server.requests() == []


# --- finding 2: the endpoint passes the outbound guard -----------------------------------------------


def test_finding_2_all_24_base_urls_are_refused_at_registration(nothing_allowed):
    client = api_client(manager())
    for url in REFUSED_BASE_URLS:
        response = client.post(
            "/api/judges/",
            {"name": "probe", "backend": "openai", "settings": {"base_url": url, "model": "m"}},
            format="json",
        )
        assert response.status_code == 400 and list(response.json()) == ["settings.base_url"], url
        assert len(response.json()["settings.base_url"][0].splitlines()) == 1
    assert not Judge.objects.filter(name="probe").exists()


def test_finding_2_a_stored_judge_on_a_loopback_url_is_refused_at_run_time_before_connecting(
    chat_server, nothing_allowed, eager_celery, django_capture_on_commit_callbacks
):
    server = chat_server("--answer", "SCORE: 1")
    study = make_label_study(items=1)
    hosts = ["127.0.0.1", "localhost", "0.0.0.0", "[::ffff:127.0.0.1]", "2130706433", "0x7f000001", "127.1"]
    for number, host in enumerate(hosts):
        stored_judge(f"inside-{number}", base_url=f"http://{host}:{server.port}/v1")

    job = run_by_api(study, "inside-0", django_capture_on_commit_callbacks)
    refusals = []
    for number in range(1, len(hosts)):
        with pytest.raises(Exception) as refused:
            judge_study(study, Judge.objects.get(name=f"inside-{number}"))
        refusals.append(str(refused.value))

    job.refresh_from_db()
    assert job.status == "failed" and "127.0.0.1 is a loopback address" in job.error.splitlines()[0]
    assert all(len(refusal.splitlines()) == 1 for refusal in refusals), refusals
    assert all("go only to public addresses" in refusal or "four decimal numbers" in refusal for refusal in refusals)
    assert server.requests() == [] and not JudgeAnswer.objects.exists()


def test_finding_2_a_redirect_from_the_endpoint_is_not_followed(
    chat_server, eager_celery, django_capture_on_commit_callbacks
):
    inside = chat_server("--answer", "SCORE: 1")
    redirecting = chat_server("--status", "302", "--location", f"{inside.base_url}/chat/completions")
    stored_judge("redirected", base_url=redirecting.base_url)

    job = run_by_api(make_label_study(items=1), "redirected", django_capture_on_commit_callbacks)

    job.refresh_from_db()
    assert job.status == "failed"
    assert "refused the request: HTTP 302 (redirects are not followed)" in job.error.splitlines()[0]
    assert len(redirecting.requests()) == 1 and inside.requests() == []


@pytest.mark.parametrize(
    "body",
    [
        "INTERNAL-SERVICE-PAGE: admin console, build 4711, db=postgres://inside",
        '{"Code": "Success", "AccessKeyId": "INTERNAL-SERVICE-PAGE", "SecretAccessKey": "x"}',
    ],
)
def test_finding_2_a_body_that_is_no_chat_completion_never_reaches_the_answers_or_the_job(
    body, chat_server, eager_celery, django_capture_on_commit_callbacks
):
    server = chat_server("--status", "200", "--body", body)
    study = make_label_study(items=1)
    stored_judge("internal", base_url=server.base_url)

    job = run_by_api(study, "internal", django_capture_on_commit_callbacks)
    answers = api_client(make_user(staff=True)).get(f"/api/studies/{study.pk}/judge-answers/").content.decode()

    job.refresh_from_db()
    assert job.status == "failed" and "answered, but not with a chat completion" in job.error.splitlines()[0]
    assert "INTERNAL-SERVICE-PAGE" not in job.error + answers
    assert not JudgeAnswer.objects.exists() and len(server.requests()) == 1


def test_finding_2_a_4xx_is_a_one_line_job_error_without_its_body_or_the_key(
    chat_server, eager_celery, django_capture_on_commit_callbacks
):
    server = chat_server("--status", "401", "--body", "INTERNAL-401-BODY: token for admin@inside is invalid")
    store_secret("openai", KEY)
    stored_judge("unauthorised", base_url=server.base_url, api_key_secret="openai")

    job = run_by_api(make_label_study(items=1), "unauthorised", django_capture_on_commit_callbacks)

    job.refresh_from_db()
    assert job.error.splitlines()[0].endswith(f"{server.base_url} refused the request: HTTP 401")
    assert "INTERNAL-401-BODY" not in job.error and KEY not in job.error
    assert [request["authorization"] for request in server.requests()] == [f"Bearer {KEY}"]


def test_an_answer_is_kept_to_its_first_characters_however_much_the_endpoint_says(chat_server):
    server = chat_server("--answer", "SCORE: 1 " + "x" * 10_000)
    judge = stored_judge("verbose", base_url=server.base_url)

    judge_study(make_label_study(items=1), judge)

    answer = JudgeAnswer.objects.get()
    assert answer.parsed == {"label": 1} and len(answer.raw_response) == MAX_ANSWER_CHARACTERS


def test_judges_against_the_allowed_local_model_server_keep_working_and_use_the_guard(chat_server, settings):
    server = chat_server("--answer", "SCORE: 1")
    store_secret("local-key", KEY)
    client = api_client(manager())
    registered = client.post(
        "/api/judges/",
        {
            "name": "local-llm",
            "backend": "openai",
            "settings": {"base_url": server.base_url, "model": "m", "api_key_secret": "local-key"},
        },
        format="json",
    )
    assert registered.status_code == 201
    judge = Judge.objects.get(name="local-llm")
    assert judge_study(make_label_study(items=2), judge)["answered"] == 2

    settings.MARGINALIA_OUTBOUND_ALLOW = []  # the same judge, once the allowance is withdrawn
    with pytest.raises(EndpointUnavailable, match=re.escape("127.0.0.1 is a loopback address")):
        judge_study(make_label_study(items=1), judge)
    assert len(server.requests()) == 2


# --- the judge secrets: write-only ------------------------------------------------------------------


def test_managers_register_change_and_delete_judge_secrets_and_never_see_a_value_again():
    client = api_client(manager())

    created = client.post("/api/judge-secrets/", {"name": "openai", "value": KEY}, format="json")
    secret_id = created.json()["id"]
    listed = client.get("/api/judge-secrets/")
    changed = client.put(f"/api/judge-secrets/{secret_id}/", {"value": KEY + "-rotated"}, format="json")
    duplicate = client.post("/api/judge-secrets/", {"name": "openai", "value": "sk-other"}, format="json")
    bad_name = client.post("/api/judge-secrets/", {"name": "../etc", "value": "sk-other"}, format="json")
    bad_value = client.post("/api/judge-secrets/", {"name": "other", "value": "sk\nheader"}, format="json")

    assert created.status_code == 201 and created.json()["hint"] == "…cdef"
    assert set(created.json()) == {"id", "name", "hint", "judges", "created_by", "created_at", "updated_at"}
    assert changed.status_code == 200 and changed.json()["hint"] == "…ated"
    assert (duplicate.status_code, list(duplicate.json())) == (400, ["name"])
    assert (bad_name.status_code, list(bad_name.json())) == (400, ["name"])
    assert (bad_value.status_code, list(bad_value.json())) == (400, ["value"])
    shown = "".join(r.content.decode() for r in (created, listed, changed, duplicate, client.get("/api/judges/")))
    assert KEY not in shown and KEY not in JudgeSecret.objects.get().sealed_value
    assert not admin.site.is_registered(JudgeSecret)
    assert client.delete(f"/api/judge-secrets/{secret_id}/").status_code == 204
    assert not JudgeSecret.objects.exists()


def test_the_command_line_takes_a_secret_from_stdin_or_a_variable_and_prints_no_value(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(KEY + "\n"))
    created = call_json_command("judge_secret", "openai")
    monkeypatch.setenv("OPERATOR_SHELL_KEY", KEY + "-2")
    changed = call_json_command("judge_secret", "openai", "--from-env", "OPERATOR_SHELL_KEY")
    deleted = call_json_command("judge_secret", "openai", "--delete")

    assert created == {"secret": "openai", "hint": "…cdef", "action": "created"}
    assert changed == {"secret": "openai", "hint": "…ef-2", "action": "changed"}
    assert deleted["action"] == "deleted" and not JudgeSecret.objects.exists()


# --- the sweep: who may manage endpoints ---------------------------------------------------------------


def endpoint_routes(secret: JudgeSecret) -> list[tuple[str, str, dict | None]]:
    endpoint = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_secret": secret.name}
    return [
        ("post", "/api/judges/", {"name": "stolen", "backend": "openai", "settings": endpoint}),
        ("get", "/api/judge-secrets/", None),
        ("post", "/api/judge-secrets/", {"name": "planted", "value": "sk-attacker-000000000000"}),
        ("put", f"/api/judge-secrets/{secret.pk}/", {"value": "sk-attacker-000000000000"}),
        ("delete", f"/api/judge-secrets/{secret.pk}/", None),
    ]


def attackers() -> dict:
    staff = make_user("staff-without-endpoint-permission", staff=True)
    annotator = make_annotator("annotator-attacker")
    staff_session, annotator_session = Client(), Client()
    staff_session.force_login(staff)
    annotator_session.force_login(annotator)
    staff_token, annotator_token = APIClient(), APIClient()
    staff_token.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    annotator_token.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=annotator).key}")
    return {
        "staff (session)": staff_session,
        "staff (token)": staff_token,
        "annotator (session)": annotator_session,
        "annotator (token)": annotator_token,
        "anonymous": Client(),
    }


def fingerprint() -> list:
    return [
        sorted(Judge.objects.values_list("name", "version", "backend")),
        sorted(JudgeSecret.objects.values_list("name", "sealed_value", "hint")),
    ]


def test_nobody_without_the_endpoint_permission_reaches_an_endpoint_or_a_secret_and_nothing_changes():
    secret = store_secret("openai", KEY)
    before = fingerprint()
    for who, client in attackers().items():
        for method, path, data in endpoint_routes(secret):
            if isinstance(client, APIClient):
                response = getattr(client, method)(path, data, format="json")
            else:
                response = getattr(client, method)(path, data or {}, content_type="application/json")
            assert response.status_code in (401, 403), f"{who} {method.upper()} {path}: {response.status_code}"
            assert KEY not in response.content.decode()
    assert fingerprint() == before


def test_staff_without_the_permission_still_run_judges_and_register_local_ones(django_capture_on_commit_callbacks):
    staff = api_client(make_user(staff=True))
    study = make_label_study(items=1)

    local = staff.post("/api/judges/", {"name": "my-local", "backend": "local", "settings": {}}, format="json")
    with django_capture_on_commit_callbacks(execute=False):
        queued = staff.post(f"/api/studies/{study.pk}/judge/", {"judge": "my-local"}, format="json")

    assert local.status_code == 201 and queued.status_code == 202
