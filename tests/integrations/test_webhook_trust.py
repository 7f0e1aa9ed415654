"""Webhooks attacked as the attack run did (issue 20, finding 7), delivered to a REAL receiver
process on 127.0.0.1 (tests/integrations/webhook_receiver.py, which verifies every signature):

- a URL with a backslash (`http://127.0.0.1:8314\\@example.org/`) and every other odd URL is
  refused at registration by the one strict parser;
- a hook stored with such a URL before the parser existed fails its own deliveries with one
  line, and every redelivery batch and `send_webhooks --all` go on to deliver the others;
- deactivating a hook stops its queued deliveries;
- a secret is shown once, at registration, stored sealed, and never returned again (GET shows a
  hint), yet the receiver verifies every signature with the secret it was shown.

The parser's refusals need no network: nothing here contacts any address but 127.0.0.1."""

import re

import pytest
from cryptography.fernet import Fernet

from annotation.services import claim_next_item, submit_judgment
from integrations.models import Webhook, WebhookDelivery
from integrations.services.delivery import deliver, deliver_due
from integrations.services.webhooks import DEACTIVATED
from integrations.tasks import deliver_webhook
from jobs.management.commands.run_platform import stop_process
from outbound.sealing import unseal
from tests.factories import (
    api_client,
    call_json_command,
    make_annotator,
    make_relic_proxy_study,
    make_user,
    make_webhook,
)
from tests.integrations.receiver_process import Receiver
from tests.judges.conftest import start_chat_server

pytestmark = pytest.mark.django_db

SECRET = "receiver-shared-secret-for-trust"
FINDING_7_URL = "http://127.0.0.1:8314\\@example.org/"


def submit(study, annotator) -> int:
    assignment = claim_next_item(study, annotator)
    return submit_judgment(annotator=annotator, item=assignment.item, position=0, seconds=2).judgment.pk


# --- registration: one strict parser --------------------------------------------------------------


@pytest.mark.parametrize(
    "url, reason",
    [
        (FINDING_7_URL, "backslash"),
        ("http://127.0.0.1:8314/\\\\example.org", "backslash"),
        ("http://attacker@127.0.0.1:8314/", "user name or password"),
        ("http://127.0.0.1:8314/ hook", "spaces or control characters"),
        ("http://127.0.0.1:8314/\r\nX-Injected: 1", "spaces or control characters"),
        ("file:///etc/passwd", "http:// or https://"),
        ("gopher://127.0.0.1:6379/_FLUSHALL", "http:// or https://"),
        ("http://127.0.0.1:0/", "port"),
        ("http://127.0.0.1:99999/", "port"),
        ("http://127.0.0.1:6379x/", "port"),
        ("http://xn--zz.localhost/", "IDNA"),
        ("http://☃.localhost/", "international domain name"),
        ("http://exa\u200bmple.localhost/", "IDNA reads as others"),
        ("http://2130706433:8314/", "four decimal numbers"),
        ("http://0x7f.1:8314/", "four decimal numbers"),
        ("http://127.0.0.1:8314/#fragment", "fragment"),
    ],
)
def test_finding_7_an_odd_url_is_refused_at_registration_and_nothing_is_stored(allow_local, url, reason):
    response = api_client(make_user(staff=True)).post("/api/webhooks/", {"url": url}, format="json")

    assert response.status_code == 400 and list(response.json()) == ["url"], response.content
    [message] = response.json()["url"]
    assert "\n" not in message
    assert re.search(reason, message), message
    assert not Webhook.objects.exists()


def test_what_registration_accepts_it_stores_normalised(allow_local):
    response = api_client(make_user(staff=True)).post(
        "/api/webhooks/", {"url": "HTTP://LocalHost:8314/Hook?x=1"}, format="json"
    )
    assert response.status_code == 201 and response.json()["url"] == "http://localhost:8314/Hook?x=1"


# --- one bad delivery never blocks the others ---------------------------------------------------------


def test_finding_7_a_stored_backslash_hook_fails_alone_and_every_batch_delivers_the_others(
    allow_local, receiver, settings, caplog
):
    server = receiver(SECRET)
    bad = make_webhook(FINDING_7_URL, SECRET, events=["judgment.submitted"])  # stored before the parser
    good = make_webhook(server.url, SECRET, events=["judgment.submitted"])
    study = make_relic_proxy_study(4, judgments_per_item=1)
    annotator = make_annotator()
    first = [submit(study, annotator) for _ in range(2)]

    deliver_webhook(bad.deliveries.first().pk)  # the worker's task at a bad delivery: no exception
    redelivery = deliver_due()  # what the periodic redelivery runs
    later = [submit(study, annotator) for _ in range(2)]
    command = call_json_command("send_webhooks", "--all")

    assert redelivery == {"attempted": 3, "delivered": 2, "failed": 1, "retrying": 0, "pending": 0}
    assert command == {"attempted": 4, "delivered": 2, "failed": 2, "retrying": 0, "pending": 0}
    assert sorted(r["body"]["data"]["judgment"] for r in server.requests()) == sorted(first + later)
    assert all(r["verified"] for r in server.requests())
    for delivery in bad.deliveries.all():
        assert delivery.status == "failed" and delivery.attempts == 1
        assert delivery.last_error == "url refused: must not contain a backslash"
    assert set(good.deliveries.values_list("status", flat=True)) == {"delivered"}
    assert "Traceback" not in caplog.text


def test_a_delivery_that_goes_wrong_in_any_other_way_is_recorded_on_it_and_the_batch_goes_on(
    allow_local, receiver, settings
):
    """A hook whose secret no configured key opens any more (a key dropped too early): its
    deliveries wait, saying why in one line, and the others are delivered."""
    server = receiver(SECRET)
    settings.MARGINALIA_SECRETS_KEY = [Fernet.generate_key().decode()]
    unreadable = make_webhook(server.url, SECRET, events=["judgment.submitted"])
    settings.MARGINALIA_SECRETS_KEY = ["DJANGO_SECRET_KEY"]
    readable = make_webhook(server.url, SECRET, events=["judgment.submitted"])
    submit(make_relic_proxy_study(1), make_annotator())

    summary = call_json_command("send_webhooks", "--all")

    assert summary == {"attempted": 2, "delivered": 1, "failed": 0, "retrying": 1, "pending": 1}
    waiting = unreadable.deliveries.get()
    assert waiting.status == "pending" and "cannot be opened with MARGINALIA_SECRETS_KEY" in waiting.last_error
    assert readable.deliveries.get().status == "delivered" and len(server.requests()) == 1


def test_a_receiver_that_redirects_gets_no_second_request(allow_local, receiver, tmp_path):
    server = receiver(SECRET)
    redirecting = start_chat_server(tmp_path, "--status", "307", "--location", server.url)
    try:
        make_webhook(redirecting.base_url, SECRET, events=["judgment.submitted"])
        submit(make_relic_proxy_study(1), make_annotator())
        assert deliver_due()["retrying"] == 1
    finally:
        stop_process(redirecting.process)
    assert WebhookDelivery.objects.get().last_error == "HTTP 307 (redirects are not followed)"
    assert server.requests() == []


# --- deactivation stops queued work -----------------------------------------------------------------


def test_finding_7_deactivating_a_hook_stops_its_queued_deliveries(allow_local, receiver):
    server = receiver(SECRET)
    hook = make_webhook(server.url, SECRET, events=["judgment.submitted"])
    study = make_relic_proxy_study(3, judgments_per_item=1)
    annotator = make_annotator()
    queued = [submit(study, annotator) for _ in range(2)]
    staff = api_client(make_user(staff=True))

    paused = staff.patch(f"/api/webhooks/{hook.pk}/", {"active": False}, format="json")
    worker_attempts = [deliver(pk, force=True) for pk in hook.deliveries.values_list("pk", flat=True)]
    batch = call_json_command("send_webhooks", "--all")
    submit(study, annotator)  # while paused: nothing is written for the hook
    resumed = staff.patch(f"/api/webhooks/{hook.pk}/", {"active": True}, format="json")

    assert paused.json()["active"] is False and resumed.json()["active"] is True
    assert worker_attempts == [None, None] and batch["attempted"] == 0
    assert list(hook.deliveries.values_list("status", "last_error")) == [("failed", DEACTIVATED)] * len(queued)
    assert server.requests() == [] and deliver_due()["attempted"] == 0


# --- secrets: shown once, stored sealed ------------------------------------------------------------------


def test_finding_7_a_secret_is_shown_once_stored_sealed_and_still_signs(allow_local, receiver, tmp_path):
    staff = api_client(make_user(staff=True))
    server = Receiver(tmp_path, "to be replaced")  # its address, before it starts with the shown secret

    created = staff.post("/api/webhooks/", {"url": server.url, "events": ["judgment.submitted"]}, format="json")
    shown = created.json()["secret"]
    hook = Webhook.objects.get()
    later = [
        staff.get("/api/webhooks/"),
        staff.get(f"/api/webhooks/{hook.pk}/"),
        staff.patch(f"/api/webhooks/{hook.pk}/", {"active": True}, format="json"),
        staff.get(f"/api/webhooks/{hook.pk}/deliveries/"),
    ]
    server.secret = shown
    receiver_process = server.start()
    try:
        submit(make_relic_proxy_study(1), make_annotator())
        assert deliver_due()["delivered"] == 1
    finally:
        receiver_process.stop()

    assert created.status_code == 201 and len(shown) == 64
    assert all(response.status_code == 200 and shown not in response.content.decode() for response in later)
    assert later[1].json()["secret_hint"] == f"…{shown[-4:]}" and "secret" not in later[1].json()
    assert shown not in hook.sealed_secret and unseal(hook.sealed_secret) == shown
    assert [request["verified"] for request in server.requests()] == [True]
