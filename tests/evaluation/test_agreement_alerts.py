"""Agreement thresholds: staff set them per study; a check runs when a report is computed and on a
worker after each batch of judgments (never in an annotator's request); each fall below a
threshold is announced once as `study.agreement_low` / `annotator.agreement_low` (webhook
outbox, delivered to a real receiver) and shown as a warning on the study page and the report."""

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.models import Judgment
from annotation.services import claim_next_item, submit_judgment
from evaluation import alerts
from evaluation.models import AgreementWatch
from evaluation.reports import cached_study_report
from evaluation.tasks import watch_agreement
from integrations.models import Webhook, WebhookDelivery
from integrations.services.delivery import deliver_due
from integrations.services.webhooks import EVENTS
from marginalia.celery import app
from retrieval.errors import InputError
from tests.factories import (
    add_label_item,
    add_label_judgment,
    api_client,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
    make_user,
    make_webhook,
)
from tests.integrations.receiver_process import Receiver

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

SECRET = "agreement-receiver-secret"
EVENT_NAMES = ["study.agreement_low", "annotator.agreement_low"]


def label_items(study, count: int, agreeing=("ann", "bea", "cal"), noisy="noise"):
    """`count` binary items that the agreeing annotators label alike (alternating 1, 0) and the
    noisy one labels the other way on every item."""
    people = {name: annotator(name) for name in (*agreeing, noisy)}
    for _ in range(count):
        item = add_label_item(study)
        truth = item.position % 2
        for name in agreeing:
            add_label_judgment(item, people[name], truth)
        add_label_judgment(item, people[noisy], 1 - truth)


def annotator(name: str):
    return get_user_model().objects.filter(username=name).first() or make_annotator(name)


@pytest.fixture
def study():
    study = make_label_study(judgments_per_item=4)
    label_items(study, 24)
    return study


def hook(events=EVENT_NAMES, url="http://127.0.0.1:9/marginalia") -> Webhook:
    """An outbox row is all these tests look at; nothing is sent to this address."""
    return make_webhook(url, SECRET, events=list(events))


def announced(event: str) -> list[dict]:
    return [delivery.payload for delivery in WebhookDelivery.objects.filter(event=event).order_by("pk")]


def test_the_events_are_registered_and_the_worker_check_is_scheduled_on_the_cpu_queue():
    assert set(EVENT_NAMES) <= set(EVENTS)
    schedule = django_settings.CELERY_BEAT_SCHEDULE["evaluation-watch-agreement"]
    assert schedule["task"] == "evaluation.tasks.watch_agreement"
    assert schedule["schedule"] == django_settings.MARGINALIA_AGREEMENT_WATCH_SECONDS
    assert app.amqp.router.route({}, "evaluation.tasks.watch_agreement")["queue"].name == "cpu"


def test_a_computed_report_checks_the_thresholds_and_announces_each_fall_once(study):
    hook()
    alerts.set_watch(study, study_threshold=0.9, annotator_threshold=0.3)
    report = cached_study_report(study)
    watch = AgreementWatch.objects.get(study=study)
    detail = report["agreement_detail"]
    assert watch.study_low and watch.study_value == detail["study"]["value"] < 0.9
    assert watch.low_annotators == {"noise": detail["annotators"]["noise"]["vs_others"]["cohen_kappa"]}
    assert watch.checked_judgments == 96
    [study_event] = announced("study.agreement_low")
    assert study_event == {
        "study": study.pk,
        "name": study.name,
        "scope": "study",
        "annotator": None,
        "measure": "krippendorff_alpha",
        "value": detail["study"]["value"],
        "threshold": 0.9,
        "evidence": 24,
        "checked_at": watch.checked_at.isoformat(),
    }
    [annotator_event] = announced("annotator.agreement_low")
    assert annotator_event["annotator"] == "noise" and annotator_event["measure"] == "cohen_kappa_vs_others"
    assert annotator_event["evidence"] == 24 * 3 and annotator_event["value"] < 0.3

    label_items(study, 2)  # new judgments: a new report, the same falls, nothing announced again
    cached_study_report(study)
    assert len(announced("study.agreement_low")) == 1 and len(announced("annotator.agreement_low")) == 1

    alerts.set_watch(study, study_threshold=None)  # removed: the warning clears ...
    assert not AgreementWatch.objects.get(study=study).study_low
    alerts.set_watch(study, study_threshold=0.95)  # ... and a new fall is announced again
    label_items(study, 1)
    cached_study_report(study)
    assert len(announced("study.agreement_low")) == 2


def test_a_study_above_its_thresholds_or_without_enough_evidence_warns_nobody():
    hook()
    small = make_label_study(judgments_per_item=4)
    label_items(small, 3)  # 3 units with two ratings or more, 9 pairs per annotator: too little to judge
    alerts.set_watch(small, study_threshold=0.99, annotator_threshold=0.99)
    cached_study_report(small)
    watch = AgreementWatch.objects.get(study=small)
    assert watch.checked_at is not None and not watch.study_low and watch.low_annotators == {}
    calm = make_label_study(judgments_per_item=3)
    label_items(calm, 24, agreeing=("ann", "bea"), noisy="cal")
    Judgment.objects.filter(item__study=calm, annotator__username="cal").delete()
    alerts.set_watch(calm, study_threshold=0.5, annotator_threshold=0.5)
    cached_study_report(calm)
    assert not AgreementWatch.objects.get(study=calm).study_low
    assert WebhookDelivery.objects.count() == 0


def test_the_worker_checks_once_a_batch_of_judgments_has_arrived_and_never_on_submission(study):
    hook()
    alerts.set_watch(study, annotator_threshold=0.3, batch_size=10)
    found = watch_agreement()["checked"][str(study.pk)]
    assert found["study_low"] is False and [entry["annotator"] for entry in found["announced"]] == ["noise"]
    assert AgreementWatch.objects.get(study=study).checked_judgments == 96
    assert watch_agreement() == {"checked": {}}  # no new batch yet
    label_items(study, 2)  # 8 judgments: still fewer than a batch
    assert watch_agreement() == {"checked": {}}
    label_items(study, 1)
    assert watch_agreement()["checked"][str(study.pk)]["announced"] == []  # checked; "noise" stays low, said once
    assert AgreementWatch.objects.get(study=study).checked_judgments == 108
    assert len(announced("annotator.agreement_low")) == 1

    proxy = make_relic_proxy_study(3, judgments_per_item=1)
    alerts.set_watch(proxy, study_threshold=0.9, batch_size=1)
    checked_before = AgreementWatch.objects.get(study=proxy).checked_at
    person = make_annotator("web")
    assignment = claim_next_item(proxy, person)
    submit_judgment(annotator=person, item=assignment.item, position=0, seconds=3)
    assert AgreementWatch.objects.get(study=proxy).checked_at == checked_before is None


def test_thresholds_and_batch_sizes_are_checked_like_any_input(study):
    for fields, field in (
        ({"study_threshold": 1.5}, "study_threshold"),
        ({"annotator_threshold": "high"}, "annotator_threshold"),
        ({"annotator_threshold": True}, "annotator_threshold"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": "12.5"}, "batch_size"),
        ({"batch_size": "²"}, "batch_size"),
        ({"colour": "red"}, "colour"),
    ):
        with pytest.raises(InputError) as caught:
            alerts.set_watch(study, **fields)
        assert caught.value.field == field
    assert not AgreementWatch.objects.filter(study=study, study_threshold__isnull=False).exists()


def test_staff_set_thresholds_through_the_api_and_see_the_last_check(study):
    client = api_client(make_user("boss", staff=True))
    url = reverse("evaluation:api-agreement-watch", args=[study.pk])
    assert client.get(url).json()["study_threshold"] is None
    response = client.put(url, {"study_threshold": 0.8, "annotator_threshold": 0.2, "batch_size": 50}, format="json")
    assert response.status_code == 200
    assert response.json()["study_threshold"] == 0.8 and response.json()["batch_size"] == 50
    bad = client.put(url, {"annotator_threshold": 7}, format="json")
    assert bad.status_code == 400 and "annotator_threshold" in bad.json()
    assert client.put(url, [1, 2], format="json").status_code == 400
    cached_study_report(study)
    state = client.get(url).json()
    assert state["study_low"] is True and set(state["low_annotators"]) == {"noise"}
    assert state["checked_judgments"] == 96 and state["study_measure"] == "krippendorff_alpha"


def test_the_study_page_and_the_report_warn_and_the_report_form_sets_the_thresholds(client, study):
    client.force_login(make_user("boss", staff=True))
    report_url = reverse("evaluation:study-report", args=[study.pk])
    page = client.get(report_url).content.decode()
    assert 'id="agreement-watch"' in page and "Agreement below the threshold" not in page
    form = reverse("evaluation:agreement-watch", args=[study.pk])
    saved = client.post(form, {"study_threshold": "0.9", "annotator_threshold": "0.3", "batch_size": "25"})
    assert saved.status_code == 302 and saved["Location"].endswith("#agreement-watch")
    watch = AgreementWatch.objects.get(study=study)
    assert (watch.study_threshold, watch.annotator_threshold, watch.batch_size) == (0.9, 0.3, 25)
    label_items(study, 1)  # a new report is computed on the next view, and checked
    page = client.get(report_url).content.decode()
    assert "Agreement below the threshold" in page and "noise (" in page
    study_page = client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert "Agreement below the threshold" in study_page and "noise (" in study_page
    assert f"/studies/{study.pk}/report/#agreement-detail" in study_page
    refused = client.post(form, {"study_threshold": "2", "annotator_threshold": "", "batch_size": "25"}, follow=True)
    assert "Not saved" in refused.content.decode() and "study_threshold" in refused.content.decode()
    assert AgreementWatch.objects.get(study=study).study_threshold == 0.9


@pytest.fixture
def receiver(tmp_path, settings):
    settings.MARGINALIA_WEBHOOKS_ALLOW_PRIVATE = True  # the receiver listens on 127.0.0.1
    settings.MARGINALIA_WEBHOOK_TIMEOUT_SECONDS = 5
    server = Receiver(tmp_path, SECRET).start()
    yield server
    server.stop()


def test_a_fall_reaches_a_real_webhook_receiver_signed(study, receiver):
    hook(url=receiver.url)
    alerts.set_watch(study, annotator_threshold=0.3)
    cached_study_report(study)
    assert deliver_due()["delivered"] == 1
    [request] = receiver.requests()
    assert request["verified"] and request["body"]["event"] == "annotator.agreement_low"
    assert request["body"]["data"]["annotator"] == "noise" and request["body"]["data"]["study"] == study.pk
