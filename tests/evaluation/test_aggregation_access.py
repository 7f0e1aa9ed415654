"""The routes for label aggregation and agreement, attacked: annotators (session or token) and
anonymous callers get nothing of anyone's answers, competences, posteriors, aggregates, agreement
or thresholds, and change nothing; an annotator whom a check found below the threshold learns
nothing of it from their own pages; staff input errors are 400s naming the field."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

from evaluation import alerts
from evaluation.models import AgreementWatch
from evaluation.reports import cached_study_report
from tests.factories import (
    add_judgment,
    api_client,
    make_annotator,
    make_relic_proxy_study,
    make_user,
    next_url,
)

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

# Who judged the study: their names are in every staff payload and must be in no other.
JUDGES = ("careful_judge", "random_judge", "contrary_judge")


@pytest.fixture
def study():
    """Twelve items judged by three annotators (one always right, one always on position 0, one
    always wrong), thresholds set so the contrary one is found below them."""
    study = make_relic_proxy_study(12, judgments_per_item=3)
    people = [make_annotator(name) for name in JUDGES]
    for item in study.items.all():
        gold = item.candidates.get(is_gold=True).position
        for person, position in zip(people, (gold, 0, (gold + 1) % 3), strict=True):
            add_judgment(item, person, position)
    alerts.set_watch(study, study_threshold=0.99, annotator_threshold=0.99)
    return study


def routes(study):
    """(method, path, body) of every route this part added, and the report and study pages that
    show its results."""
    pk = study.pk
    return [
        ("get", reverse("evaluation:api-study-aggregate", args=[pk]) + "?method=dawid-skene", None),
        ("get", reverse("evaluation:api-study-aggregate", args=[pk]) + "?method=glad&seed=3", None),
        ("get", reverse("evaluation:api-study-soft-labels", args=[pk]) + "?method=mace", None),
        ("get", reverse("evaluation:api-study-agreement", args=[pk]), None),
        ("get", reverse("evaluation:api-agreement-watch", args=[pk]), None),
        ("put", reverse("evaluation:api-agreement-watch", args=[pk]), {"study_threshold": -1}),
        ("post", reverse("evaluation:api-agreement-watch", args=[pk]), {"study_threshold": -1}),
        ("post", reverse("evaluation:agreement-watch", args=[pk]), {"study_threshold": "-1", "batch_size": "1"}),
        ("get", reverse("evaluation:agreement-watch", args=[pk]), None),
        ("get", reverse("evaluation:study-report", args=[pk]), None),
        ("get", f"/studies/{pk}/", None),
    ]


def watch_state(study) -> tuple:
    watch = AgreementWatch.objects.get(study=study)
    return watch.study_threshold, watch.annotator_threshold, watch.batch_size, watch.checked_at


def call(client, method, path, body):
    if isinstance(client, Client):
        return (
            getattr(client, method)(path, body or {}, content_type="application/json")
            if method == "put"
            else (getattr(client, method)(path, body or {}))
        )
    return getattr(client, method)(path, body or {}, format="json")


def leaked(body: str) -> list[str]:
    """Staff data found in a response body."""
    words = (
        *JUDGES,
        "competence",
        "posterior",
        "changed_from_majority",
        "agreement_low",
        "cohen_kappa",
        "study_threshold",
        "annotator_threshold",
    )
    return [word for word in words if word in body]


@pytest.mark.parametrize("how", ["session", "token"])
def test_an_annotator_is_refused_everywhere_and_changes_nothing(study, how):
    attacker = make_annotator("attacker")
    if how == "session":
        client = Client()
        client.force_login(attacker)
    else:
        client = api_client()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=attacker).key}")
    before = watch_state(study)
    for method, path, body in routes(study):
        response = call(client, method, path, body)
        assert response.status_code == 403 or (
            response.status_code == 302 and response["Location"].startswith("/accounts/login/")
        ), (method, path, response.status_code)
        text = b"".join(response.streaming_content if response.streaming else [response.content]).decode()
        assert not leaked(text), (method, path, leaked(text))
    assert watch_state(study) == before


def test_anonymous_callers_are_refused_everywhere_and_change_nothing(study):
    before = watch_state(study)
    for client in (Client(), api_client()):
        for method, path, body in routes(study):
            response = call(client, method, path, body)
            assert response.status_code in (401, 403) or (
                response.status_code == 302 and response["Location"].startswith("/accounts/login/")
            ), (method, path, response.status_code)
            assert not leaked(response.content.decode()), (method, path)
    assert watch_state(study) == before


def test_an_annotator_found_below_the_threshold_learns_nothing_of_it_from_their_own_pages(study):
    cached_study_report(study)
    watch = AgreementWatch.objects.get(study=study)
    assert "contrary_judge" in watch.low_annotators  # the check did find them
    contrary = get_user_model().objects.get(username="contrary_judge")
    payload = api_client(contrary).get(next_url(study)).content.decode()
    session = Client()
    session.force_login(contrary)
    pages = [payload, session.get("/").content.decode(), session.get(f"/annotate/{study.pk}/").content.decode()]
    for body in pages:
        assert not leaked(body.replace("contrary_judge", "")) and "Agreement below" not in body


def test_staff_get_everything_and_bad_input_is_a_400_naming_the_field(study):
    client = api_client(make_user("boss", staff=True))
    aggregate = reverse("evaluation:api-study-aggregate", args=[study.pk])
    output = client.get(aggregate + "?method=dawid-skene").json()
    assert set(output["competence"]) == set(JUDGES) and output["method"] == "dawid-skene"
    soft = client.get(reverse("evaluation:api-study-soft-labels", args=[study.pk]) + "?method=glad")
    assert soft.status_code == 200 and soft["Content-Type"].startswith("application/x-ndjson")
    assert len(b"".join(soft.streaming_content).decode().splitlines()) == 12
    agreement = client.get(reverse("evaluation:api-study-agreement", args=[study.pk])).json()
    assert set(agreement["annotators"]) == set(JUDGES) and agreement["study"]["measure"] == "krippendorff_alpha"
    for query, field in (("?method=wawa", "method"), ("?method=mace&seed=abc", "seed"), ("?seed=1e9", "seed")):
        for route in ("evaluation:api-study-aggregate", "evaluation:api-study-soft-labels"):
            response = client.get(reverse(route, args=[study.pk]) + query)
            assert response.status_code == 400 and field in response.json(), (route, query)
    assert client.get("/api/studies/999999/aggregate/").status_code == 404
    assert client.get("/api/studies/99999999999999999999999/soft-labels/").status_code == 404
