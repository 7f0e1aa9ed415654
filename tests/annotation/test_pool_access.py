"""Pools through the REST API, the staff pages and an attacker's eyes: staff create a pooled
study and grow it over HTTP and on the study page; annotators reach neither the pool nor its
growth, and nothing they are shown (payloads, receipts, the annotation page) names the strategy,
a run, a rank, a fusion score, a priority or an outcome, whatever the strategy."""

import json
import re

import pytest
from django.test import Client

from annotation.models import Pool, PooledPair, Study
from retrieval.models import Retriever
from tests.annotation.test_pools import RANKINGS, RELEVANT, ranked_runs
from tests.factories import api_client, make_annotator, make_label_collection, make_user, next_url, submit_url

pytestmark = pytest.mark.django_db

RETRIEVER_NAMES = {"A": "leaky-bm25-k1-0.9", "B": "leaky-dense-minilm", "C": "leaky-imported-splade"}
# What only the pool's record holds: none of it may reach an annotator, as a key or as a value.
POOL_KEYS = (
    "pool",
    "strategy",
    "budget",
    "score",
    "order",
    "hits",
    "drawn_from",
    "decided",
    "relevant",
    "priorities",
    "turn",
    "lookahead",
    "rrf_k",
    "rbp_p",
    "run",
    "rank",
    "sources",
    "all_sources",
    "source_run",
    "source_rank",
)
POOL_WORDS = re.compile(r"\b(rrf|rbp|mtf|move-to-front|fusion|priority|pooled?|budget)\b", re.IGNORECASE)


@pytest.fixture
def world():
    collection = make_label_collection(1, 10)
    runs = ranked_runs(collection, {name: {"q0": order} for name, order in RANKINGS.items()})
    for name, run in runs.items():
        Retriever.objects.filter(pk=run.retriever_id).update(name=RETRIEVER_NAMES[name])
    return collection, runs


def staff_client():
    return api_client(make_user(staff=True))


def create_over_http(collection, runs, **fields):
    body = {
        "name": "Night reading",
        "kind": "relevance",
        "collection": collection.name,
        "runs": runs,
        "depth": 4,
        **fields,
    }
    return staff_client().post("/api/studies/", body, format="json")


# --- staff ---------------------------------------------------------------------------------------


def test_staff_create_a_budgeted_pool_read_it_and_grow_it_over_http(world):
    collection, runs = world
    response = create_over_http(collection, [runs["A"].pk, runs["B"].pk], pool="rrf", budget=3)
    assert response.status_code == 201, response.content
    assert response.json()["items"] == 3 and response.json()["pool"]["strategy"] == "rrf"
    study = Study.objects.get(pk=response.json()["study_id"])
    pool = staff_client().get(f"/api/studies/{study.pk}/pool/").json()
    assert (pool["strategy"], pool["drawn"], pool["pairs"], pool["budget"]) == ("rrf", 3, 7, 3)
    assert [pair["passage"] for pair in pool["pairs_page"][:3]] == ["d0", "d4", "d1"]
    assert all(pair["item"] is not None for pair in pool["pairs_page"][:3])
    extend = f"/api/studies/{study.pk}/extend/"
    grown = staff_client().post(extend, {"runs": [runs["C"].pk], "budget": 2}, format="json")
    assert grown.status_code == 200, grown.content
    assert grown.json() | {"pairs_added": 3, "pairs_already_pooled": 1, "items_added": 2, "items": 5} == grown.json()
    again = staff_client().post(extend, {"runs": [runs["C"].pk]}, format="json")
    assert again.status_code == 400 and "already in the pool" in again.json()["runs"][0]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"pool": "borda"}, "pool"),
        ({"pool": "rbp", "rbp_p": 1.5}, "rbp_p"),
        ({"budget": 0}, "budget"),
        ({"pool": "mtf", "use_pools": True}, "use_pools"),
        ({"lookahead": 0}, "lookahead"),
    ],
)
def test_bad_pool_settings_are_a_400_naming_the_field_and_create_nothing(world, fields, field):
    collection, runs = world
    response = create_over_http(collection, [runs["A"].pk], **fields)
    assert response.status_code == 400 and field in response.json(), response.content
    assert not Study.objects.exists() and not Pool.objects.exists()


def test_pool_settings_belong_to_relevance_studies_only(world):
    collection, runs = world
    body = {"name": "q", "kind": "quotability", "collection": collection.name, "run": runs["A"].pk, "budget": 3}
    response = staff_client().post("/api/studies/", body, format="json")
    assert response.status_code == 400 and response.json()["budget"] == ["not a setting of quotability studies"]


def test_the_pool_endpoint_pages_and_refuses_what_is_not_there(world):
    collection, runs = world
    study_id = create_over_http(collection, [runs["A"].pk], pool="mtf", budget=3).json()["study_id"]
    client = staff_client()
    assert client.get(f"/api/studies/{study_id}/pool/?page=2").status_code == 400
    assert client.get(f"/api/studies/{study_id}/pool/?page=x").status_code == 400
    body = client.get(f"/api/studies/{study_id}/pool/").json()
    assert (body["page"], body["pages"], body["state"]["turn"] is not None) == (1, 1, True)
    proxy_like = Study.objects.create(name="no pool", kind="relevance", collection=collection)
    assert client.get(f"/api/studies/{proxy_like.pk}/pool/").status_code == 404
    assert client.post(f"/api/studies/{proxy_like.pk}/extend/", {"runs": [runs["B"].pk]}).status_code == 400


def test_the_staff_form_builds_a_budgeted_pool_and_the_study_page_grows_it(world, client):
    collection, runs = world
    client.force_login(make_user(staff=True))
    form = {
        "name": "form pool",
        "collection": collection.pk,
        "runs": [runs["A"].pk, runs["B"].pk],
        "depth": 4,
        "pool": "rbp",
        "budget": 2,
        "rbp_p": "0.5",
        "judgments_per_item": 1,
        "seed": 0,
        "context_left": 4,
        "context_right": 4,
        "scale": "binary",
        "rationale": "none",
        "claim_minutes": 30,
    }
    response = client.post("/studies/new/relevance/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    study = Study.objects.get(name="form pool")
    assert (study.pool.strategy, study.pool.budget, study.pool.rbp_p, study.items.count()) == ("rbp", 2, 0.5, 2)
    page = client.get(f"/studies/{study.pk}/").content.decode()
    assert 'id="pool"' in page and "leaky-dense-minilm" in page and "2 to judge" in page
    grown = client.post(f"/studies/{study.pk}/pool/extend/", {"runs": [runs["C"].pk], "budget": 1})
    assert grown.status_code == 302 and grown["Location"].endswith("#pool")
    assert study.items.count() == 3 and study.pool.__class__.objects.get(pk=study.pool.pk).runs[-1] == runs["C"].pk
    refused = client.post(f"/studies/{study.pk}/pool/extend/", {"runs": [runs["C"].pk]})
    assert refused.status_code == 400 and "Select a valid choice" in refused.content.decode()


# --- annotators ----------------------------------------------------------------------------------


def test_annotators_reach_neither_the_pool_nor_its_growth(world):
    collection, runs = world
    study_id = create_over_http(collection, [runs["A"].pk], pool="rrf", budget=2).json()["study_id"]
    attacker = api_client(make_annotator("attacker"))
    assert attacker.get(f"/api/studies/{study_id}/pool/").status_code == 403
    assert attacker.post(f"/api/studies/{study_id}/extend/", {"runs": [runs["B"].pk]}).status_code == 403
    browser = Client()
    browser.force_login(make_annotator("page-attacker"))
    page = browser.post(f"/studies/{study_id}/pool/extend/", {"runs": [runs["B"].pk], "budget": 5})
    assert page.status_code in (302, 403) and not page.get("Location", "").endswith("#pool")
    assert Pool.objects.get(study_id=study_id).runs == [runs["A"].pk]
    assert PooledPair.objects.filter(pool__study_id=study_id, item__isnull=False).count() == 2


def leaked(body: str, *, is_json: bool, runs) -> list[str]:
    found = [name for name in RETRIEVER_NAMES.values() if name in body]
    found += [f"run {run.pk}" for run in runs.values() if f"run {run.pk}" in body or f"runs/{run.pk}/" in body]
    found += POOL_WORDS.findall(body)
    if is_json:
        found += [f'"{key}"' for key in POOL_KEYS if f'"{key}"' in body]
    return found


@pytest.mark.parametrize("strategy", ["depth", "rrf", "rbp", "mtf"])
def test_what_annotators_are_shown_names_nothing_of_the_pool(world, strategy):
    collection, runs = world
    created = create_over_http(collection, [run.pk for run in runs.values()], pool=strategy, budget=6)
    study = Study.objects.get(pk=created.json()["study_id"])
    Study.objects.filter(pk=study.pk).update(judgments_per_item=2)
    annotators = [make_annotator(f"ann{n}") for n in range(2)]
    bodies = []
    for annotator in annotators:
        client, browser = api_client(annotator), Client()
        browser.force_login(annotator)
        while True:
            bodies.append((browser.get(f"/annotate/{study.pk}/").content.decode(), False))
            payload = client.get(next_url(study))
            bodies.append((payload.content.decode(), True))
            if payload.json()["finished"]:
                break
            passage = payload.json()["candidates"][0]["text"]
            label = int(any(f"number {name[1:]} " in passage for name in RELEVANT))
            receipt = client.post(submit_url(study), {"item": payload.json()["item"], "label": label}, format="json")
            bodies.append((receipt.content.decode(), True))
    assert PooledPair.objects.filter(pool__study=study, item__isnull=False).count() == 6
    assert len(bodies) > 20
    for body, is_json in bodies:
        assert not leaked(body, is_json=is_json, runs=runs), json.dumps(body[:400])
