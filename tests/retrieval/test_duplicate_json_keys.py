"""REST bodies refuse a key given twice in one object, as the importers refuse it in files: JSON
keeps the last value silently, and which one the sender meant is unknown (a submit naming two
positions stored the second). A 400 names the key; nothing is written."""

import pytest

from annotation.models import Judgment
from jobs.models import Job
from retrieval.models import Run
from tests.factories import (
    api_client,
    make_annotator,
    make_relic_collection,
    make_relic_proxy_study,
    make_user,
    next_url,
    submit_url,
)

pytestmark = pytest.mark.django_db


def post_raw(client, url: str, body: str):
    return client.generic("POST", url, body.encode(), content_type="application/json")


def test_a_run_request_with_a_repeated_key_is_refused_naming_it():
    collection = make_relic_collection(2)
    staff = api_client(make_user("researcher", staff=True))
    body = f'{{"collection": {collection.pk}, "retriever": "bm25", "depth": 10, "depth": 1000}}'

    response = post_raw(staff, "/api/runs/", body)

    assert response.status_code == 400
    assert response.json() == {"detail": "JSON parse error - field 'depth': key 'depth' appears twice in one object"}
    assert not Run.objects.exists() and not Job.objects.exists()


def test_a_submit_with_two_positions_is_refused_and_stores_nothing():
    study = make_relic_proxy_study(2)
    annotator = api_client(make_annotator("reader"))
    item = annotator.get(next_url(study)).json()["item"]

    response = post_raw(annotator, submit_url(study), f'{{"item": {item}, "position": 0, "position": 1}}')

    assert response.status_code == 400 and "key 'position' appears twice" in response.json()["detail"]
    assert not Judgment.objects.exists()


def test_a_repeated_key_deep_inside_a_body_is_refused_too():
    staff = api_client(make_user("researcher", staff=True))

    response = post_raw(staff, "/api/runs/", '{"collection": 1, "options": {"a": {"b": 1, "b": 2}}}')

    assert response.status_code == 400 and "key 'b' appears twice" in response.json()["detail"]
