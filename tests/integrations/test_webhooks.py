"""Webhooks: staff register them (per study or global); events write the outbox in the
submitting transaction; deliveries are signed with HMAC-SHA256 and retried with backoff, logged
with their status; private and loopback addresses are refused unless allowed. Delivered here by
`deliver_due` (what the worker and `send_webhooks` run) to a REAL receiver process; the worker
itself is exercised in test_webhook_worker.py."""

import hashlib
import hmac
import json
from datetime import datetime

import pytest
from django.db import transaction
from django.test import Client

from annotation.models import AnnotatorFlag, Judgment, Study
from annotation.services import claim_next_item, submit_judgment
from annotation.services.quality import refresh_flags
from integrations.models import Webhook, WebhookDelivery
from integrations.services.crowd import configure_crowd_link
from integrations.services.delivery import deliver_due
from integrations.services.webhooks import DEACTIVATED, register_webhook, signature
from jobs.models import Job
from jobs.services import execute, mark_failed
from tests.factories import (
    api_client,
    call_json_command,
    make_annotator,
    make_relic_proxy_study,
    make_user,
    make_webhook,
)

pytestmark = pytest.mark.django_db

SECRET = "receiver-shared-secret"


def judge(study, annotator):
    assignment = claim_next_item(study, annotator)
    return submit_judgment(annotator=annotator, item=assignment.item, position=0, seconds=2).judgment


def hook(url: str, *, study=None, events=()) -> Webhook:
    return make_webhook(url, SECRET, study=study, events=list(events))


# --- the outbox ------------------------------------------------------------------------------------


def test_a_judgment_writes_its_events_in_the_outbox_and_completing_the_study_says_so():
    study = make_relic_proxy_study(2, judgments_per_item=1)
    hook("http://127.0.0.1:9/hook")
    annotator = make_annotator("ann")
    first = judge(study, annotator)
    assert list(WebhookDelivery.objects.values_list("event", flat=True)) == ["judgment.submitted", "item.complete"]
    judge(study, annotator)
    events = list(WebhookDelivery.objects.values_list("event", flat=True))
    assert events[2:] == ["judgment.submitted", "item.complete", "study.complete"]
    payload = WebhookDelivery.objects.first().payload
    assert payload["judgment"] == first.pk and payload["annotator"] == "ann" and payload["choice_position"] == 0


def test_a_study_hook_hears_only_its_study_and_only_the_events_it_asked_for():
    study, other = make_relic_proxy_study(2), make_relic_proxy_study(2)
    mine = hook("http://127.0.0.1:9/mine", study=study, events=["judgment.submitted"])
    annotator = make_annotator()
    judge(study, annotator)
    judge(other, annotator)
    assert [(d.webhook_id, d.event, d.payload["study"]) for d in WebhookDelivery.objects.all()] == [
        (mine.pk, "judgment.submitted", study.pk)
    ]


def test_a_rolled_back_submission_announces_nothing():
    study = make_relic_proxy_study(1)
    hook("http://127.0.0.1:9/hook")
    annotator = make_annotator()
    with pytest.raises(RuntimeError), transaction.atomic():
        judge(study, annotator)
        raise RuntimeError("the surrounding work failed")
    assert not Judgment.objects.exists() and not WebhookDelivery.objects.exists()


def test_an_inactive_hook_gets_nothing():
    make_webhook("http://127.0.0.1:9/hook", SECRET, active=False)
    judge(make_relic_proxy_study(1), make_annotator())
    assert not WebhookDelivery.objects.exists()


def test_jobs_finishing_or_failing_reach_global_hooks_only():
    study_hook = hook("http://127.0.0.1:9/study", study=make_relic_proxy_study(1))
    global_hook = hook("http://127.0.0.1:9/all", events=["job.finished", "job.failed"])
    done, broken = Job.objects.create(kind="run"), Job.objects.create(kind="train")
    execute(done.pk, lambda progress: {"queries": 3})
    Job.objects.filter(pk=broken.pk).update(status=Job.Status.RUNNING)
    mark_failed(broken.pk, "RuntimeError: out of memory\ntraceback ...")
    mark_failed(broken.pk, "reported twice")  # the second report is no second event
    rows = [(d.webhook_id, d.event, d.payload["job"], d.payload["status"]) for d in WebhookDelivery.objects.all()]
    assert rows == [
        (global_hook.pk, "job.finished", done.pk, "succeeded"),
        (global_hook.pk, "job.failed", broken.pk, "failed"),
    ]
    assert WebhookDelivery.objects.get(event="job.failed").payload["error"] == "RuntimeError: out of memory"
    assert not study_hook.deliveries.exists()


def test_a_new_quality_flag_is_announced_once():
    study = make_relic_proxy_study(6, judgments_per_item=2)
    hook("http://127.0.0.1:9/hook", events=["annotator.flagged"])
    Study.objects.filter(pk=study.pk).update(fast_fraction=0.5)
    study.refresh_from_db()
    slow, fast = make_annotator("slow"), make_annotator("fast")
    for _ in range(6):
        for annotator, seconds in ((slow, 60), (fast, 1)):
            assignment = claim_next_item(study, annotator)
            submit_judgment(annotator=annotator, item=assignment.item, position=0, seconds=seconds)
    Judgment.objects.filter(annotator=slow).update(server_seconds=60)
    Judgment.objects.filter(annotator=fast).update(server_seconds=1)
    refresh_flags(study)
    refresh_flags(study)
    flags = AnnotatorFlag.objects.filter(annotator=fast)
    deliveries = WebhookDelivery.objects.filter(event="annotator.flagged")
    assert flags.count() == 1 and deliveries.count() == 1
    assert deliveries.get().payload["annotator"] == "fast" and deliveries.get().payload["reason"] == "too_fast"


# --- delivery to a real receiver -----------------------------------------------------------------


def test_the_receiver_verifies_the_signature_of_every_event(allow_local, receiver):
    server = receiver(SECRET)
    hook(server.url)
    study = make_relic_proxy_study(1, judgments_per_item=1)
    judge(study, make_annotator())
    assert deliver_due() == {"attempted": 3, "delivered": 3, "failed": 0, "retrying": 0, "pending": 0}
    requests = server.requests()
    assert [r["body"]["event"] for r in requests] == ["judgment.submitted", "item.complete", "study.complete"]
    assert all(r["verified"] for r in requests)
    first = requests[0]
    assert first["headers"]["X-Marginalia-Event"] == "judgment.submitted"
    assert first["headers"]["X-Marginalia-Delivery"] == first["body"]["id"]
    # The same signature from an independent HMAC, and a forged secret does not match it.
    body = json.dumps(first["body"], sort_keys=True).encode()
    timestamp = first["headers"]["X-Marginalia-Timestamp"]
    independent = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    assert first["headers"]["X-Marginalia-Signature"] == f"sha256={independent}" == signature(SECRET, timestamp, body)
    assert signature("wrong", timestamp, body) != first["headers"]["X-Marginalia-Signature"]
    assert all(d.status == "delivered" and d.last_status_code == 200 for d in WebhookDelivery.objects.all())


def test_a_500_is_retried_with_backoff_and_every_attempt_is_logged(allow_local, receiver, settings):
    server = receiver(SECRET, fail_first=2)
    hook(server.url, events=["judgment.submitted"])
    judge(make_relic_proxy_study(1), make_annotator())
    settings.MARGINALIA_WEBHOOK_BACKOFF_SECONDS = 3600
    assert deliver_due()["retrying"] == 1
    assert deliver_due()["attempted"] == 0  # not due: backing off for an hour
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.attempts == 1 and delivery.last_status_code == 500
    waited = (delivery.next_attempt_at - datetime.fromisoformat(delivery.log[0]["at"])).total_seconds()
    assert waited == pytest.approx(3600, abs=1)
    settings.MARGINALIA_WEBHOOK_BACKOFF_SECONDS = 0
    assert deliver_due(force=True)["retrying"] == 1
    assert deliver_due(force=True)["delivered"] == 1
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 3
    assert [entry["status_code"] for entry in delivery.log] == [500, 500, 200]
    assert [r["status"] for r in server.requests()] == [500, 500, 200]
    ids = {r["headers"]["X-Marginalia-Delivery"] for r in server.requests()}
    assert ids == {str(delivery.delivery_id)}  # one delivery id across retries: receivers dedupe on it


def test_nothing_is_lost_while_the_receiver_is_down(allow_local, receiver):
    server = receiver(SECRET)
    hook(server.url, events=["judgment.submitted"])
    server.stop()
    study = make_relic_proxy_study(3, judgments_per_item=1)
    annotator = make_annotator()
    judgments = [judge(study, annotator) for _ in range(3)]  # submissions go through meanwhile
    assert deliver_due() == {"attempted": 3, "delivered": 0, "failed": 0, "retrying": 3, "pending": 3}
    assert all("Connection refused" in d.last_error for d in WebhookDelivery.objects.all())
    server.start()
    summary = call_json_command("send_webhooks", "--all")
    assert summary == {"attempted": 3, "delivered": 3, "failed": 0, "retrying": 0, "pending": 0}
    received = sorted(r["body"]["data"]["judgment"] for r in server.requests())
    assert received == sorted(j.pk for j in judgments)  # each exactly once


def test_a_delivery_gives_up_after_the_last_attempt(allow_local, receiver, settings):
    settings.MARGINALIA_WEBHOOK_MAX_ATTEMPTS = 2
    server = receiver(SECRET, fail_first=5)
    hook(server.url, events=["judgment.submitted"])
    judge(make_relic_proxy_study(1), make_annotator())
    deliver_due()
    assert deliver_due()["failed"] == 1
    assert WebhookDelivery.objects.get().status == "failed" and len(server.requests()) == 2
    assert deliver_due()["attempted"] == 0


def test_nothing_is_sent_to_a_private_address_by_default(receiver):
    server = receiver(SECRET)
    hook(server.url)  # written straight to the table, past the registration check
    judge(make_relic_proxy_study(1, judgments_per_item=1), make_annotator())
    summary = deliver_due()
    assert summary["failed"] == 3 and summary["delivered"] == 0
    assert server.requests() == []
    assert all("is a loopback address" in d.last_error for d in WebhookDelivery.objects.all())


# --- registration --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://10.1.2.3/",
        "http://169.254.169.254/latest",
        "http://[::1]/",
        "http://192.168.0.10/",
        "ftp://127.0.0.1/",
    ],
)
def test_registering_a_private_or_non_http_address_is_refused(url):
    response = api_client(make_user(staff=True)).post("/api/webhooks/", {"url": url}, format="json")
    assert response.status_code == 400 and "url" in response.json()
    assert not Webhook.objects.exists()


def test_registering_a_local_address_works_only_when_the_setting_allows_it(settings):
    settings.MARGINALIA_WEBHOOKS_ALLOW_PRIVATE = True
    hook_row = api_client(make_user(staff=True)).post(
        "/api/webhooks/", {"url": "http://127.0.0.1:9/hook", "events": ["study.complete"]}, format="json"
    )
    assert hook_row.status_code == 201 and len(hook_row.json()["secret"]) == 64


def test_unknown_events_and_job_events_on_a_study_hook_are_refused(settings):
    settings.MARGINALIA_WEBHOOKS_ALLOW_PRIVATE = True
    client = api_client(make_user(staff=True))
    study = make_relic_proxy_study(1)
    unknown = client.post("/api/webhooks/", {"url": "http://127.0.0.1/", "events": ["judgment.deleted"]}, format="json")
    assert unknown.status_code == 400 and "events" in unknown.json()
    jobs_only = client.post(
        "/api/webhooks/", {"url": "http://127.0.0.1/", "events": ["job.failed"], "study": study.pk}, format="json"
    )
    assert jobs_only.status_code == 400 and "global" in jobs_only.json()["events"][0]


def test_staff_pause_read_the_log_and_remove_a_hook(settings):
    settings.MARGINALIA_WEBHOOKS_ALLOW_PRIVATE = True
    client = api_client(make_user(staff=True))
    created, _ = register_webhook(url="http://127.0.0.1:9/hook")
    judge(make_relic_proxy_study(1), make_annotator())
    paused = client.patch(f"/api/webhooks/{created.pk}/", {"active": False}, format="json")
    assert paused.json()["active"] is False
    log = client.get(f"/api/webhooks/{created.pk}/deliveries/").json()
    assert {row["event"] for row in log} >= {"judgment.submitted"}
    assert {(row["status"], row["last_error"]) for row in log} == {("failed", DEACTIVATED)}
    assert client.delete(f"/api/webhooks/{created.pk}/").status_code == 204
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()


def test_annotators_participants_and_anonymous_cannot_register_or_read_webhooks(settings):
    settings.MARGINALIA_WEBHOOKS_ALLOW_PRIVATE = True
    existing, secret = register_webhook(url="http://127.0.0.1:9/hook")
    link = configure_crowd_link(make_relic_proxy_study(1))
    participant = Client()
    participant.get(f"/crowd/{link.slug}/", {"PROLIFIC_PID": "P1", "SESSION_ID": "S1"})
    assert participant.session.get("_auth_user_id")  # signed in as the participant
    for client in (api_client(make_annotator()), api_client(), participant):
        for method, path, data in [
            ("get", "/api/webhooks/", {}),
            ("post", "/api/webhooks/", {"url": "http://127.0.0.1:9/steal"}),
            ("get", f"/api/webhooks/{existing.pk}/", {}),
            ("patch", f"/api/webhooks/{existing.pk}/", {"active": False}),
            ("delete", f"/api/webhooks/{existing.pk}/", {}),
            ("get", f"/api/webhooks/{existing.pk}/deliveries/", {}),
        ]:
            kwargs = (
                {"format": "json"} if hasattr(client, "force_authenticate") else {"content_type": "application/json"}
            )
            response = getattr(client, method)(path, data, **kwargs)
            assert response.status_code in (401, 403), (method, path, response.status_code)
            assert secret not in response.content.decode()
    assert list(Webhook.objects.values_list("pk", "active")) == [(existing.pk, True)]
