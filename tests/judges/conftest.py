"""Fixtures for judge tests: a real OpenAI-compatible server process (tests/judges/openai_server.py)
started per test with the behaviour the test needs, and small studies to judge. The server
listens on 127.0.0.1, which the outbound guard refuses unless allowed: these tests allow it the
way a deployment with a local model server does (MARGINALIA_OUTBOUND_ALLOW), and the tests of
the guard itself take the allowance away."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from jobs.management.commands.run_platform import free_port, stop_process
from marginalia.celery import app
from tests.conftest import PROJECT_ROOT


class ChatServer:
    def __init__(self, port: int, log: Path, process: subprocess.Popen):
        self.port, self.log_path, self.process = port, log, process

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]


def start_chat_server(folder: Path, *args: str, wait: float = 180) -> ChatServer:
    port = free_port()
    log = folder / f"chat-{port}.log"
    output = folder / f"chat-{port}.out"
    with output.open("w") as stream:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.judges.openai_server", "--port", str(port), "--log", str(log), *args],
            cwd=PROJECT_ROOT,
            stdout=stream,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
        except urllib.error.HTTPError:
            return ChatServer(port, log, process)  # answering (a 501 for GET): up
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"chat server exited: {output.read_text()[-2000:]}") from None
            time.sleep(0.2)
    stop_process(process)
    raise RuntimeError("chat server did not start")


LOCAL_MODEL_SERVER = ["127.0.0.1"]


@pytest.fixture
def eager_celery(monkeypatch):
    """Judging jobs run inside the request's commit, no worker; a job that fails records its
    error on the Job row (what a worker would do) instead of raising into the test."""
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setitem(app.conf, "task_eager_propagates", False)


@pytest.fixture(autouse=True)
def local_model_server_allowed(settings):
    settings.MARGINALIA_OUTBOUND_ALLOW = LOCAL_MODEL_SERVER


@pytest.fixture
def chat_server(tmp_path):
    """A factory: chat_server("--answer", "SCORE: 1", ...) starts a server; all stop at the end."""
    started = []

    def start(*args: str, wait: float = 180) -> ChatServer:
        server = start_chat_server(tmp_path, *args, wait=wait)
        started.append(server)
        return server

    yield start
    for server in started:
        stop_process(server.process)
