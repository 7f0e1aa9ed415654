"""A frozen broker, with real processes: Redis stopped with SIGSTOP under a running platform (a
worker, beat, gunicorn with two workers, a webhook receiver). `retrieve --async` exits with one
line about as fast as it starts, an upload answers 503 within seconds, and an annotator's submit
with a webhook registered answers 201 with the judgment stored once; once Redis resumes, the
periodic redelivery sends every event of the submit, each once.

Before: `retrieve --async` hung past 120 s, /api/uploads/ answered 500 after 30 s (gunicorn's
worker timeout), and so did the submit, though its judgment was stored."""

import json
import sqlite3
import subprocess
import time
import uuid

import pytest
import requests

from tests.conftest import PROJECT_ROOT
from tests.integrations.receiver_process import Receiver
from tests.live_platform import MANAGE, WholePlatform, manage

pytestmark = pytest.mark.redis

SECRET = "frozen-live-secret"
PASSWORD = "pw-for-tests"
SETUP = """
import json
from tests.factories import make_annotator, make_relic_proxy_study, make_user, make_webhook
make_user("curator", staff=True)
make_annotator("reader")
study = make_relic_proxy_study(4, judgments_per_item=1, name="frozen")
make_webhook({url!r}, {secret!r}, events=[])
print(json.dumps({{"study": study.pk, "collection": study.collection.name}}))
"""


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    server = Receiver(tmp_path_factory.mktemp("receiver"), SECRET).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def platform(tmp_path_factory, receiver):
    running = WholePlatform(
        tmp_path_factory.mktemp("frozen"),
        web=True,
        MARGINALIA_WEBHOOKS_ALLOW_PRIVATE="1",
        MARGINALIA_WEBHOOK_REDELIVERY_SECONDS="2",
    ).migrate()
    created = json.loads(manage(running, "shell", "-c", SETUP.format(url=receiver.url, secret=SECRET)).splitlines()[-1])
    running.start()
    running.created = created
    yield running
    running.stop()


def signed_in(platform, username: str) -> requests.Session:
    session = requests.Session()
    response = session.post(f"{platform.web_url}/api/auth/token/", json={"username": username, "password": PASSWORD})
    session.headers["Authorization"] = f"Token {response.json()['token']}"
    return session


def rows(platform, sql: str) -> list[tuple]:
    with sqlite3.connect(platform.database, timeout=30) as connection:
        return connection.execute(sql).fetchall()


def timed_command(platform, *args) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run([*MANAGE, *args], env=platform.env, cwd=PROJECT_ROOT, capture_output=True, text=True)
    return result, time.monotonic() - started


def test_every_path_refuses_quickly_or_survives_and_the_events_arrive_after_the_thaw(platform, receiver):
    staff, annotator = signed_in(platform, "curator"), signed_in(platform, "reader")
    collection, study = platform.created["collection"], platform.created["study"]
    # How long a command takes to start and refuse with nothing wrong but its input (the baseline).
    _, baseline = timed_command(platform, "retrieve", "--collection", "no-such", "--retriever", "bm25", "--async")
    item = annotator.get(f"{platform.web_url}/api/annotate/{study}/next/").json()["item"]
    counts = "SELECT (SELECT COUNT(*) FROM retrieval_run), (SELECT COUNT(*) FROM retrieval_job)"
    before = rows(platform, counts)

    platform.freeze()
    try:
        queued, seconds = timed_command(
            platform, "retrieve", "--collection", collection, "--retriever", "bm25", "--async"
        )
        assert queued.returncode == 1, queued.stdout
        assert queued.stderr.strip().count("\n") == 0 and "cannot be reached" in queued.stderr
        assert "Traceback" not in queued.stderr and seconds < baseline + 10, (seconds, baseline)

        started = time.monotonic()
        book = {"file": ("tale.txt", b"It was a dark and stormy night.\n")}
        upload = staff.post(f"{platform.web_url}/api/uploads/", data={"kind": "book", "title": "T"}, files=book)
        assert upload.status_code == 503 and "cannot be reached" in upload.json()["detail"]
        assert time.monotonic() - started < 10

        started = time.monotonic()
        submitted = annotator.post(
            f"{platform.web_url}/api/annotate/{study}/submit/", json={"item": item, "position": 0}
        )
        assert submitted.status_code == 201 and time.monotonic() - started < 10, submitted.content
    finally:
        platform.thaw()

    assert rows(platform, counts) == before  # no run, no job
    assert not [path for path in (platform.folder / "data" / "uploads").rglob("*") if path.is_file()]
    assert rows(platform, f"SELECT COUNT(*) FROM annotation_judgment WHERE item_id = {item}") == [(1,)]
    events = rows(platform, "SELECT delivery_id, event FROM integrations_webhookdelivery ORDER BY id")
    assert ("judgment.submitted",) in [(event,) for _, event in events]

    received = receiver.wait_for(len(events), seconds=60)
    deadline = time.monotonic() + 30
    while rows(platform, "SELECT DISTINCT status FROM integrations_webhookdelivery") != [("delivered",)]:
        assert time.monotonic() < deadline, (
            rows(platform, "SELECT * FROM integrations_webhookdelivery"),
            platform.log(),
        )
        time.sleep(0.3)
    ids = [request["headers"]["X-Marginalia-Delivery"] for request in receiver.requests() if request["status"] == 200]
    assert sorted(ids) == sorted(str(uuid.UUID(delivery)) for delivery, _ in events) and len(received) == len(events)
    assert rows(platform, f"SELECT COUNT(*) FROM annotation_judgment WHERE item_id = {item}") == [(1,)]
