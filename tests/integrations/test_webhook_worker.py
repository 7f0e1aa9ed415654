"""Webhooks delivered by a real Celery worker (with real Redis) to a real receiver process: a
submission made in another process commits its outbox rows, the worker signs and sends them,
retries a 500, and holds on to events while the receiver is down until it is back."""

import json
import sqlite3
import time

import pytest

from tests.integrations.receiver_process import Receiver
from tests.live_platform import manage

pytestmark = pytest.mark.redis

SECRET = "worker-test-secret"
SUBMIT = """
import json
from annotation.models import Study
from annotation.services import claim_next_item, submit_judgment
from integrations.models import Webhook
from tests.factories import make_annotator, make_relic_proxy_study, make_webhook
if not Webhook.objects.exists():
    make_webhook({url!r}, {secret!r}, events=["judgment.submitted"])
    make_relic_proxy_study(8, judgments_per_item=1, name="webhook-worker-study")
study = Study.objects.get(name="webhook-worker-study")
annotator = make_annotator("annotator-{tag}")
ids = []
for _ in range({items}):
    assignment = claim_next_item(study, annotator)
    ids.append(submit_judgment(annotator=annotator, item=assignment.item, position=0).judgment.pk)
print(json.dumps(ids))
"""


@pytest.fixture(scope="module")
def platform(platform):
    """The shared platform, allowed to send to the test's local receiver, with quick retries."""
    platform["env"].update(
        MARGINALIA_WEBHOOKS_ALLOW_PRIVATE="1",
        MARGINALIA_WEBHOOK_BACKOFF_SECONDS="0.5",
        MARGINALIA_WEBHOOK_BACKOFF_MAX_SECONDS="2",
    )
    return platform


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    server = Receiver(tmp_path_factory.mktemp("receiver"), SECRET, fail_first=1).start()
    yield server
    server.stop()


def submit(platform, receiver, items: int) -> list[int]:
    code = SUBMIT.format(url=receiver.url, secret=SECRET, items=items, tag=time.monotonic_ns())
    return json.loads(manage(platform, "shell", "-c", code).strip().splitlines()[-1])


def delivery_rows(platform) -> list[dict]:
    with sqlite3.connect(platform["database"], timeout=30) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(row) for row in connection.execute("SELECT * FROM integrations_webhookdelivery ORDER BY id")]


def wait_until_delivered(platform, count: int, seconds: float = 90) -> list[dict]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rows = delivery_rows(platform)
        if len(rows) >= count and all(row["status"] == "delivered" for row in rows):
            return rows
        time.sleep(0.3)
    return delivery_rows(platform)


def test_the_worker_delivers_a_signed_event_and_retries_a_500(platform, worker, receiver):
    [judgment] = submit(platform, receiver, 1)
    rows = wait_until_delivered(platform, 1)
    assert [row["status"] for row in rows] == ["delivered"], rows
    assert rows[0]["attempts"] == 2 and [e["status_code"] for e in json.loads(rows[0]["log"])] == [500, 200]
    requests = receiver.requests()
    assert [r["status"] for r in requests] == [500, 200] and all(r["verified"] for r in requests)
    assert requests[-1]["body"]["data"]["judgment"] == judgment


def test_events_wait_while_the_receiver_is_down_and_arrive_once_it_is_back(platform, worker, receiver):
    before = len(receiver.requests())
    receiver.stop()
    judgments = submit(platform, receiver, 3)  # the submissions complete with the receiver down
    time.sleep(1.5)
    waiting = delivery_rows(platform)[-3:]
    assert all(row["status"] == "pending" and "refused" in row["last_error"] for row in waiting), waiting
    receiver.start()
    rows = wait_until_delivered(platform, 4)
    assert all(row["status"] == "delivered" for row in rows), rows
    received = [r["body"]["data"]["judgment"] for r in receiver.requests()[before:] if r["status"] == 200]
    assert sorted(received) == sorted(judgments)
