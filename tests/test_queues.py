"""Work that never blocks: with the workers run_platform starts (one per queue, tests/live_platform.py
`platform_workers`), a BM25 run started while a slow judge is answering a study finishes while
the judge is still running, not after it. Before the queues were split, one worker with one
process took the BM25 run only once the judge ended (a 2-second run waited 152 s)."""

import json
import sqlite3
import time

import pytest

from jobs.management.commands.run_platform import stop_process
from tests.factories import write_beir_folder
from tests.judges.conftest import LOCAL_MODEL_SERVER, start_chat_server
from tests.live_platform import WAIT_SECONDS, manage, wait_for_job, worker_log

pytestmark = pytest.mark.redis

ITEMS = 12
ANSWER_SECONDS = 1.5  # the judge's endpoint takes this long per answer: 18 s for the study


@pytest.fixture(scope="module")
def platform(platform):
    """The shared platform, allowed to reach the test's model server on 127.0.0.1."""
    platform["env"]["MARGINALIA_OUTBOUND_ALLOW"] = ",".join(LOCAL_MODEL_SERVER)
    return platform


@pytest.fixture
def slow_endpoint(platform):
    server = start_chat_server(platform["folder"], "--answer", "SCORE: 1", "--delay", str(ANSWER_SECONDS))
    yield server
    stop_process(server.process)


def last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def job_row(database, job_id: int) -> dict:
    with sqlite3.connect(database, timeout=30) as connection:
        connection.row_factory = sqlite3.Row
        return dict(connection.execute("SELECT * FROM retrieval_job WHERE id = ?", (job_id,)).fetchone())


def wait_until_answering(database, job_id: int) -> None:
    """Until the judge's job runs and has stored its first answer (it holds its worker)."""
    deadline = time.monotonic() + WAIT_SECONDS
    with sqlite3.connect(database, timeout=30) as connection:
        while connection.execute("SELECT COUNT(*) FROM judges_judgeanswer").fetchone()[0] == 0:
            assert time.monotonic() < deadline, "the judge never answered"
            time.sleep(0.2)
    assert job_row(database, job_id)["status"] == "running"


def test_a_bm25_run_started_during_a_slow_judge_finishes_while_the_judge_is_still_running(
    platform_workers, platform, slow_endpoint
):
    beir = write_beir_folder(
        platform["folder"] / "beside-the-judge",
        corpus=[{"_id": f"d{i}", "title": "", "text": f"salt ledger page {i} of the marsh"} for i in range(20)],
        queries=[{"_id": f"q{i}", "text": f"ledger page {i}"} for i in range(5)],
        qrels=[(f"q{i}", f"d{i}", 1) for i in range(5)],
    )
    manage(platform, "import_beir", beir, "--collection", "beside-the-judge", "--json")
    study_id = last_json(
        manage(
            platform,
            "shell",
            "-c",
            f"import json\nfrom tests.factories import make_label_study\n"
            f"print(json.dumps(make_label_study(items={ITEMS}).pk))",
        )
    )
    settings = {"base_url": slow_endpoint.base_url, "model": "served", "batch_size": 1, "concurrency": 1}
    manage(platform, "register_judge", "slow", "--backend", "openai", "--config", json.dumps(settings))
    judging = last_json(manage(platform, "judge_study", study_id, "--judge", "slow", "--async", "--json"))
    assert judging["queue"] == "long"
    wait_until_answering(platform["database"], judging["job_id"])

    started = time.monotonic()
    run = last_json(
        manage(platform, "retrieve", "--collection", "beside-the-judge", "--retriever", "bm25", "--async", "--json")
    )
    bm25 = wait_for_job(platform["database"], run["job_id"])
    waited = time.monotonic() - started
    judge_then = job_row(platform["database"], judging["job_id"])

    assert bm25["status"] == "succeeded", bm25["error"] or worker_log(platform)
    assert judge_then["status"] == "running", f"the judge ended first: {judge_then}"
    judged = wait_for_job(platform["database"], judging["job_id"])
    assert judged["status"] == "succeeded", judged["error"] or worker_log(platform)
    assert bm25["finished_at"] < judged["finished_at"]
    print(f"BM25 run finished {waited:.1f} s after it was started, beside a judge of {ITEMS * ANSWER_SECONDS:.0f} s")
