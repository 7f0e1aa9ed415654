"""The openai backend against a real OpenAI-compatible server process started by each test
(tests/judges/openai_server.py): answers with tokens, 429 with Retry-After honoured, 5xx backed
off, an endpoint that is down, malformed answers, and the embedded model served over HTTP."""

import threading
import time

import pytest
from django.core.management.base import CommandError

from jobs.models import Job
from jobs.services import create_job, execute, request_cancel
from judges.asking import judge_study
from judges.models import Judge, JudgeAnswer, JudgeSecret
from judges.secrets import store_secret
from judges.services import register_judge
from retrieval.errors import InputError
from tests.factories import call_json_command, make_label_study

pytestmark = pytest.mark.django_db


def endpoint_judge(base_url: str, name: str = "endpoint", **settings):
    return register_judge(
        name, "openai", {"base_url": base_url, "model": "served", "retries": 2, "concurrency": 2, **settings}
    )


def test_answers_come_back_parsed_with_tokens_and_the_key_is_the_judge_secret_it_names(chat_server):
    server = chat_server("--answer", "SCORE: 1")
    store_secret("served-key", "sk-test-sealed-not-stored-in-clear")
    judge = endpoint_judge(server.base_url, api_key_secret="served-key")
    study = make_label_study(items=3)

    summary = call_json_command("judge_study", str(study.pk), "--judge", "endpoint")

    assert (summary["answered"], summary["failed"], summary["asked"]) == (3, 0, 3)
    assert [a.parsed for a in JudgeAnswer.objects.filter(judge=judge)] == [{"label": 1}] * 3
    assert all(a.prompt_tokens > 0 and a.completion_tokens == 2 for a in JudgeAnswer.objects.all())
    assert "sk-test-sealed" not in str(judge.settings) + str(JudgeSecret.objects.values_list())
    assert {request["authorization"] for request in server.requests()} == {"Bearer sk-test-sealed-not-stored-in-clear"}
    assert len(server.requests()) == 3
    assert call_json_command("judge_study", str(study.pk), "--judge", "endpoint")["asked"] == 0
    assert len(server.requests()) == 3


def test_a_judge_registered_with_an_environment_variable_works_while_the_deployment_lists_it(
    chat_server, monkeypatch, settings
):
    server = chat_server("--answer", "SCORE: 1")
    monkeypatch.setenv("JUDGE_TEST_KEY", "sk-from-the-listed-variable")
    settings.MARGINALIA_JUDGE_KEY_ENVS = ["JUDGE_TEST_KEY"]
    study = make_label_study(items=1)

    judge_study(study, endpoint_judge(server.base_url, api_key_env="JUDGE_TEST_KEY"))
    settings.MARGINALIA_JUDGE_KEY_ENVS = []
    with pytest.raises(InputError, match="judges may not read environment variable JUDGE_TEST_KEY"):
        judge_study(make_label_study(items=1), Judge.objects.get(name="endpoint"))

    assert [request["authorization"] for request in server.requests()] == ["Bearer sk-from-the-listed-variable"]


def test_a_429_is_retried_after_the_wait_its_retry_after_header_asks_for(chat_server):
    server = chat_server("--answer", "SCORE: 0", "--rate-limit", "1", "--retry-after", "2")
    study = make_label_study(items=1)

    summary = judge_study(study, endpoint_judge(server.base_url, concurrency=1))

    refused, answered = server.requests()
    assert (refused["status"], answered["status"]) == (429, 200)
    assert refused["prompt"] == answered["prompt"]
    assert answered["time"] - refused["time"] >= 2.0
    assert summary["answered"] == 1


def test_server_errors_are_retried_with_backoff(chat_server):
    server = chat_server("--answer", "SCORE: 1", "--fail-5xx", "2")
    study = make_label_study(items=1)

    assert judge_study(study, endpoint_judge(server.base_url, concurrency=1))["answered"] == 1
    assert [request["status"] for request in server.requests()] == [500, 500, 200]


def test_an_endpoint_that_is_down_fails_in_one_line_and_stores_nothing(tmp_path):
    from jobs.management.commands.run_platform import free_port

    endpoint_judge(f"http://127.0.0.1:{free_port()}/v1", retries=1)
    study = make_label_study(items=2)

    with pytest.raises(CommandError) as refused:
        call_json_command("judge_study", str(study.pk), "--judge", "endpoint")

    assert "no answer after 2 tries" in str(refused.value) and "\n" not in str(refused.value)
    assert not JudgeAnswer.objects.exists()


def test_malformed_answers_are_stored_raw_with_the_reason_they_could_not_be_read(chat_server):
    server = chat_server("--answer", "I would rather not say.")
    study = make_label_study(items=2)

    summary = judge_study(study, endpoint_judge(server.base_url))

    assert (summary["answered"], summary["failed"]) == (0, 2)
    for answer in JudgeAnswer.objects.all():
        assert answer.parsed is None
        assert (answer.raw_response, answer.failure_reason) == ("I would rather not say.", "no number in the response")


@pytest.mark.timeout(1800)  # the server loads the model on a shared CPU first
def test_the_embedded_model_served_over_http_answers_through_the_openai_backend(chat_server):
    server = chat_server("--model", wait=600)
    study = make_label_study(items=1, label_schema={"scale": "0-10"})

    summary = judge_study(study, endpoint_judge(server.base_url, max_tokens=6))

    answer = JudgeAnswer.objects.get()
    assert summary["answered"] + summary["failed"] == 1
    assert answer.raw_response.strip() and answer.prompt_tokens > 20 and answer.completion_tokens >= 1
    assert [request["status"] for request in server.requests()] == [200]


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_job_keeps_what_it_stored_and_the_next_run_asks_only_the_rest(chat_server):
    server = chat_server("--answer", "SCORE: 1", "--delay", "0.4")
    study = make_label_study(items=6)
    judge = endpoint_judge(server.base_url, concurrency=1, batch_size=1)
    job = create_job("judge", "cpu")
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(execute(job.pk, lambda p: judge_study(study, judge, 1, p))))
    worker.start()
    deadline = time.monotonic() + 60
    while JudgeAnswer.objects.count() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    request_cancel(job)
    worker.join(60)

    job.refresh_from_db()
    stored = JudgeAnswer.objects.count()
    assert job.status == Job.Status.CANCELLED and outcome == {"cancelled": True}
    assert 2 <= stored < 6

    summary = judge_study(study, judge)
    assert (summary["asked"], summary["answered"]) == (6 - stored, 6)
    prompts = [request["prompt"] for request in server.requests()]
    assert len(prompts) == len(set(prompts)) == 6
