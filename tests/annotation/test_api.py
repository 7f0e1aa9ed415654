"""The annotation REST API: who may call what, what annotators can (not) learn from it, and the
staff exports."""

import csv
import io
import json

import pytest
from rest_framework.authtoken.models import Token

from annotation.models import Judgment, Study
from annotation.services import claim_next_item, submit_judgment
from tests.factories import (
    api_client,
    make_annotator,
    make_neighbour_run,
    make_relic_collection,
    make_relic_proxy_study,
    make_user,
    next_url,
    response_text,
    submit_url,
)

pytestmark = pytest.mark.django_db


# --- who may call what -------------------------------------------------------------------------


STAFF_ENDPOINTS = [
    ("get", "/api/studies/"),
    ("post", "/api/studies/"),
    ("get", "/api/studies/{study}/"),
    ("get", "/api/judgments/?study={study}"),
    ("get", "/api/judgments/?study={study}&format=csv"),
    ("post", "/api/judgments/{judgment}/void/"),
]


@pytest.fixture
def study_with_judgment():
    study = make_relic_proxy_study(2)
    annotator = make_annotator()
    assignment = claim_next_item(study, annotator)
    judgment = submit_judgment(annotator=annotator, item=assignment.item, position=0).judgment
    return study, judgment


@pytest.mark.parametrize(("method", "url"), STAFF_ENDPOINTS)
def test_staff_endpoints_refuse_annotators_and_anonymous_callers(study_with_judgment, method, url):
    study, judgment = study_with_judgment
    url = url.format(study=study.pk, judgment=judgment.pk)
    assert getattr(api_client(make_annotator()), method)(url, {}, format="json").status_code == 403
    assert getattr(api_client(), method)(url, {}, format="json").status_code in (401, 403)
    judgment.refresh_from_db()
    assert not judgment.voided


@pytest.mark.parametrize(("method", "url"), [("get", "next"), ("post", "next"), ("post", "submit")])
def test_annotator_endpoints_refuse_anonymous_callers(method, url):
    study = make_relic_proxy_study(1)
    assert getattr(api_client(), method)(f"/api/annotate/{study.pk}/{url}/", {}, format="json").status_code in (
        401,
        403,
    )


def test_token_authentication_works_and_a_bad_token_is_refused():
    study = make_relic_proxy_study(1)
    annotator = make_annotator()
    client = api_client()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=annotator).key}")
    assert client.get(next_url(study)).status_code == 200
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get(next_url(study)).status_code in (401, 403)  # session auth comes first: 403


def test_blocked_and_unlisted_annotators_get_403():
    study = make_relic_proxy_study(1)
    listed = make_annotator()
    study.annotators.set([listed])
    assert api_client(listed).get(next_url(study)).status_code == 200
    assert api_client(make_annotator()).get(next_url(study)).status_code == 403
    blocked = make_annotator(blocked=True)
    study.annotators.add(blocked)
    response = api_client(blocked).post(next_url(study))
    assert response.status_code == 403 and "blocked" in response.json()["detail"]


def test_unknown_study_is_404():
    assert api_client(make_annotator()).get("/api/annotate/999999/next/").status_code == 404


# --- the annotator's flow ----------------------------------------------------------------------


def test_next_then_submit_then_finished():
    study = make_relic_proxy_study(1, guidelines="Pick the quoted passage.")
    client = api_client(make_annotator())
    payload = client.get(next_url(study)).json()
    assert payload["finished"] is False and payload["guidelines"] == "Pick the quoted passage."
    assert [c["position"] for c in payload["candidates"]] == [0, 1, 2]
    item = study.items.get()
    assert payload["context_left"] == item.query.left_context and payload["context_right"] == item.query.right_context
    assert payload["progress"] == {"done": 0, "total": 1}
    assert client.post(next_url(study)).json()["item"] == payload["item"]  # resumed, not re-claimed

    chosen = payload["candidates"][1]["id"]
    response = client.post(
        submit_url(study), {"item": payload["item"], "candidate": chosen, "seconds": 7}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["candidate"] == chosen and response.json()["created"] is True
    again = client.post(submit_url(study), {"item": payload["item"], "position": 0}, format="json")
    assert again.status_code == 200 and again.json()["candidate"] == chosen and again.json()["created"] is False

    finished = client.get(next_url(study)).json()
    assert finished["finished"] is True and finished["item"] is None
    assert finished["progress"] == {"done": 1, "total": 1}


def test_context_follows_the_studys_left_right_setting():
    collection = make_relic_collection(1)
    study = make_relic_proxy_study(1, collection=collection, context_left=1, context_right=2)
    payload = api_client(make_annotator()).get(next_url(study)).json()
    query = collection.queries.get()
    assert payload["context_left"] == query.left_context[-1:]
    assert payload["context_right"] == query.right_context[:2]
    assert payload["query_text"] == ""


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"candidate": 1}, 400),  # no item
        ({"item": 999999, "position": 0}, 400),
        ({"item": "{item}"}, 400),  # no answer
        ({"item": "{item}", "candidate": 999999}, 400),
        ({"item": "{item}", "position": 9}, 400),
    ],
)
def test_malformed_submissions_are_400_and_store_nothing(body, code):
    study = make_relic_proxy_study(1)
    annotator = make_annotator()
    client = api_client(annotator)
    item = client.get(next_url(study)).json()["item"]
    body = {key: (item if value == "{item}" else value) for key, value in body.items()}
    assert client.post(submit_url(study), body, format="json").status_code == code
    assert not Judgment.objects.exists()


def test_submitting_an_unclaimed_item_is_409():
    study = make_relic_proxy_study(2)
    response = api_client(make_annotator()).post(
        submit_url(study), {"item": study.items.first().pk, "position": 0}, format="json"
    )
    assert response.status_code == 409 and not Judgment.objects.exists()


# --- what an annotator can learn: nothing about the gold, the runs, or other annotators ---------


def annotator_bodies(study, annotator) -> list[str]:
    """Every annotator-facing response body for one item, from claim to resubmission."""
    client = api_client(annotator)
    first = client.get(next_url(study))
    payload = first.json()
    submitted = client.post(submit_url(study), {"item": payload["item"], "position": 0, "seconds": 4}, format="json")
    again = client.post(submit_url(study), {"item": payload["item"], "position": 1}, format="json")
    after = client.get(next_url(study))
    return [first.content.decode(), submitted.content.decode(), again.content.decode(), after.content.decode()]


def test_annotator_responses_never_leak_gold_sources_ids_or_other_answers():
    study = make_relic_proxy_study(2, judgments_per_item=3)
    # Others have already answered the first item with their own choices.
    for position, name in ((2, "other_one"), (1, "other_two")):
        other = make_annotator(name)
        assignment = claim_next_item(study, other)
        submit_judgment(annotator=other, item=assignment.item, position=position, seconds=99.25)
    bodies = annotator_bodies(study, make_annotator("attacker"))
    item = study.items.get(pk=json.loads(bodies[0])["item"])
    forbidden = [c.passage.external_id for c in item.candidates.select_related("passage")]
    forbidden += [
        item.query.external_id,
        "is_gold",
        "gold",
        "source",
        "rank",
        "run",
        "other_one",
        "other_two",
        "99.25",
        "correct",
        "judgments",
        "annotator",
    ]
    for body in bodies:
        for secret in forbidden:
            assert secret not in body, f"{secret!r} leaked in {body[:200]}"


def test_the_gold_candidate_looks_exactly_like_a_negative():
    study = make_relic_proxy_study(1)
    payload = api_client(make_annotator()).get(next_url(study)).json()
    item = study.items.get()
    gold_id = item.candidates.get(is_gold=True).pk
    gold = next(c for c in payload["candidates"] if c["id"] == gold_id)
    negative = next(c for c in payload["candidates"] if c["id"] != gold_id)
    assert gold.keys() == negative.keys() == {"id", "position", "title", "text"}
    assert type(gold["id"]) is type(negative["id"])


# --- staff ------------------------------------------------------------------------------------


def test_staff_create_list_and_retrieve_studies():
    staff = make_user(staff=True)
    collection = make_relic_collection(4)
    run = make_neighbour_run(collection)
    annotator = make_annotator("listed")
    client = api_client(staff)
    response = client.post(
        "/api/studies/",
        {
            "name": "api study",
            "collection": collection.name,
            "negatives_run": run.pk,
            "items": 3,
            "seed": 2,
            "annotators": ["listed"],
            "guidelines": "Read carefully.",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["items"] == 3 and body["skipped"] == 0 and body["study"]["annotators"] == ["listed"]
    study = Study.objects.get(pk=body["study_id"])
    assert list(study.annotators.all()) == [annotator] and study.created_by == staff

    listed = client.get("/api/studies/").json()
    assert [s["name"] for s in listed["results"]] == ["api study"]
    detail = client.get(f"/api/studies/{study.pk}/").json()
    assert detail["overview"]["items"] == 3 and detail["overview"]["judgments"] == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [({"candidates": 21}, "candidates"), ({"collection": "nope"}, "collection"), ({"name": "taken"}, "name")],
)
def test_staff_create_reports_bad_settings_by_field(change, field):
    collection = make_relic_collection(2)
    run = make_neighbour_run(collection)
    make_relic_proxy_study(1, name="taken")
    body = {"name": "new", "collection": collection.name, "negatives_run": run.pk, "items": 2, **change}
    response = api_client(make_user(staff=True)).post("/api/studies/", body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert Study.objects.count() == 1


def export(study, fmt=None):
    url = f"/api/judgments/?study={study.pk}" + (f"&format={fmt}" if fmt else "")
    return api_client(make_user(staff=True)).get(url)


def test_judgments_export_in_json_csv_and_jsonl(study_with_judgment):
    study, judgment = study_with_judgment
    rows = json.loads(response_text(export(study)))
    assert rows == json.loads(response_text(export(study, "json")))
    assert len(rows) == 1
    row = rows[0]
    assert row["judgment"] == judgment.pk and row["study"] == study.pk and row["item"] == judgment.item_id
    assert row["annotator"] == judgment.annotator.username and row["position"] == 0
    assert row["correct"] == judgment.choice.is_gold and row["voided"] is False
    assert row["query"] == judgment.item.query.external_id
    assert row["choice"] == judgment.choice.passage.external_id

    as_csv = export(study, "csv")
    assert as_csv["Content-Type"].startswith("text/csv")
    parsed = list(csv.DictReader(io.StringIO(response_text(as_csv))))
    assert parsed[0]["judgment"] == str(judgment.pk) and parsed[0]["choice"] == row["choice"]

    as_jsonl = export(study, "jsonl")
    assert [json.loads(line) for line in response_text(as_jsonl).splitlines()] == rows


def test_judgments_export_refuses_unknown_formats_and_missing_studies(study_with_judgment):
    study, _ = study_with_judgment
    response = export(study, "xml")
    assert response.status_code == 400 and "format" in response.json()
    staff = api_client(make_user(staff=True))
    assert staff.get("/api/judgments/").status_code == 400
    assert staff.get("/api/judgments/?study=999999&format=csv").status_code == 404


def test_staff_void_a_judgment_with_a_reason(study_with_judgment):
    study, judgment = study_with_judgment
    staff = make_user(staff=True)
    client = api_client(staff)
    assert client.post(f"/api/judgments/{judgment.pk}/void/", {}, format="json").status_code == 400
    response = client.post(f"/api/judgments/{judgment.pk}/void/", {"reason": "spam"}, format="json")
    assert response.status_code == 200 and response.json()["voided"] is True
    assert response.json()["voided_by"] == staff.username
    row = json.loads(response_text(export(study)))[0]
    assert row["voided"] is True and row["void_reason"] == "spam"


def test_the_openapi_schema_includes_the_annotation_routes():
    response = api_client(make_user(staff=True)).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    for route in (
        "/api/annotate/{study_id}/next/",
        "/api/annotate/{study_id}/submit/",
        "/api/studies/",
        "/api/judgments/",
        "/api/judgments/{id}/void/",
    ):
        assert route in paths
