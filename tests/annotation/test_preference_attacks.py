"""Attacks on preference studies. The routes they add are staff-only: anonymous callers and
annotators (session or token) are refused on each of them and change nothing, while staff get the
page. What an annotator reaches of a preference study (its page, next, submit) names no passage
or query id, no run or system, no score, no other annotator's answer and no judge's; forged or
foreign answers are refused and store nothing; racing submissions never push an adaptive query
past its budget."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Judgment, PreferenceQuery
from annotation.services import claim_next_item, import_judgments, submit_judgment
from judges.models import JudgeAnswer
from judges.services import register_judge
from retrieval.models import Passage, Query, Retriever, Run
from tests.factories import api_client, make_annotator, make_preference_study, make_user, write_jsonl

pytestmark = pytest.mark.django_db

RUN_NAME = "leaky-system-name"
JUDGE_SAYS = "JUDGE-RAW-ANSWER-SECRET"
VICTIM = "victim_annotator"
PREFERENCE_ROUTES = {
    "study_create_kind": "/studies/new/preference/",
    "evaluation:preference-scores": "/studies/{study}/preferences/",
    "evaluation:preference-run": "/studies/{study}/preferences/run/",
    "evaluation:api-preference-scores": "/api/studies/{study}/preferences/",
    "evaluation:api-preference-qrels": "/api/studies/{study}/preferences/qrels/",
    "evaluation:api-preference-compare": "/api/studies/{study}/preferences/compare/?runs={run}",
    "evaluation:api-preference-run": "/api/studies/{study}/preferences/run/",
    "evaluation:study-report": "/studies/{study}/report/",
}
# JSON keys only staff payloads have (the scores, the provenance, the design's state).
STAFF_KEYS = (
    "scores",
    "ranking",
    "intervals",
    "wins",
    "source_run",
    "source_rank",
    "sources",
    "found",
    "pool",
    "annotator",
)


class World:
    """A preference study on passages and queries whose ids give answers away, the victim's
    answers in, a judge's answers stored, a run of a named system."""

    def __init__(self, tmp_path):
        self.staff = make_user("staff_boss", staff=True)
        self.attacker = make_annotator("attacker")
        make_annotator(VICTIM)
        self.study = make_preference_study(n_queries=2, n_passages=4, design="all-pairs", judgments_per_item=2)
        collection = self.study.collection
        for passage in Passage.objects.filter(collection=collection):
            Passage.objects.filter(pk=passage.pk).update(external_id=f"unique_{passage.pk}")
        for query in Query.objects.filter(collection=collection):
            Query.objects.filter(pk=query.pk).update(external_id=f"q_unique_{query.pk}")
        self.run = Run.objects.get(pk=self.study.parameters["runs"][0])
        Run.objects.filter(pk=self.run.pk).update(name=RUN_NAME)
        Retriever.objects.filter(pk=self.run.retriever_id).update(name=RUN_NAME)
        rows = []
        for item in self.study.items.prefetch_related("candidates__passage"):
            shown = [c.passage.external_id for c in sorted(item.candidates.all(), key=lambda c: c.position)]
            rows.append({"item": item.pk, "annotator": VICTIM, "preferred": shown[1]})
        write_jsonl(tmp_path / "victim.jsonl", rows)
        import_judgments(self.study, tmp_path / "victim.jsonl")
        judge = register_judge("pair-judge", "run", {"run": self.run.pk})
        JudgeAnswer.objects.bulk_create(
            [
                JudgeAnswer(judge=judge, item=item, prompt_hash="x", raw_response=JUDGE_SAYS, parsed={"position": 0})
                for item in self.study.items.all()
            ]
        )

    def secrets(self) -> list[str]:
        collection = self.study.collection
        return [
            *Passage.objects.filter(collection=collection).values_list("external_id", flat=True),
            *Query.objects.filter(collection=collection).values_list("external_id", flat=True),
            "unique_",
            RUN_NAME,
            VICTIM,
            JUDGE_SAYS,
            "staff_boss",
        ]

    def fingerprint(self) -> dict:
        return {
            "judgments": sorted(Judgment.objects.values_list("pk", "item_id", "annotator_id", "label")),
            "runs": Run.objects.count(),
            "items": self.study.items.count(),
        }

    def path(self, template: str) -> str:
        return template.format(study=self.study.pk, run=self.run.pk)


@pytest.fixture
def world(tmp_path):
    return World(tmp_path)


def leaks(body: str, secrets: list[str], *, keys: bool) -> list[str]:
    found = [secret for secret in secrets if secret in body]
    if keys:
        found += [f'"{key}"' for key in STAFF_KEYS if f'"{key}"' in body]
    return found


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def refused(response) -> bool:
    if response.status_code in (401, 403):
        return True
    return response.status_code == 302 and response["Location"].split("?")[0] in ("/accounts/login/", "/admin/login/")


def test_the_preference_routes_are_the_ones_the_url_configuration_names():
    from django.urls import reverse

    assert reverse("study_create_kind", args=["preference"]) == "/studies/new/preference/"
    for name, template in PREFERENCE_ROUTES.items():
        if name != "study_create_kind":
            assert reverse(name, kwargs={"study_id": 7}) == template.format(study=7, run="x").split("?")[0]


@pytest.mark.parametrize("who", ["anonymous", "annotator-session", "annotator-token"])
def test_nobody_but_staff_reaches_a_preference_route_and_a_refusal_changes_nothing(world, who):
    client = {
        "anonymous": lambda: Client(),
        "annotator-session": lambda: _session(world.attacker),
        "annotator-token": lambda: token_client(world.attacker),
    }[who]()
    before = world.fingerprint()
    for name, template in PREFERENCE_ROUTES.items():
        for method in ("get", "post"):
            response = getattr(client, method)(world.path(template), {"name": "stolen ranking"})
            assert refused(response), f"{who} {method.upper()} {name} answered {response.status_code}"
            if who != "anonymous":
                assert response.status_code != 401
    assert world.fingerprint() == before
    staff = _session(world.staff)
    for name, template in PREFERENCE_ROUTES.items():
        if not name.endswith("-run"):
            assert staff.get(world.path(template)).status_code == 200, name


def _session(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("authentication", ["session", "token"])
def test_a_preference_item_names_no_id_no_system_no_score_and_no_other_answer(world, authentication):
    client = _session(world.attacker) if authentication == "session" else token_client(world.attacker)
    secrets = world.secrets()
    served = client.get(f"/api/annotate/{world.study.pk}/next/")
    body = served.content.decode()
    assert served.status_code == 200 and served.json()["preference"]["shape"] == "pairwise"
    assert not leaks(body, secrets, keys=True)
    page = client.get(f"/annotate/{world.study.pk}/").content.decode()
    assert not leaks(page, secrets, keys=False)
    item = served.json()["item"]
    answered = (
        client.post(f"/api/annotate/{world.study.pk}/submit/", {"item": item, "position": 0}, format="json")
        if authentication == "token"
        else client.post(
            f"/api/annotate/{world.study.pk}/submit/",
            json.dumps({"item": item, "position": 0}),
            content_type="application/json",
        )
    )
    assert answered.status_code == 201
    assert not leaks(answered.content.decode(), secrets, keys=True)
    # The answer the attacker got back is their own, in candidate ids of the item they were shown.
    shown = [candidate["id"] for candidate in served.json()["candidates"]]
    assert answered.json()["label"] == {"order": [[0], [1]], "shown": shown}


def test_forged_and_foreign_preference_answers_are_refused_and_store_nothing(world):
    client = api_client(world.attacker)
    before = world.fingerprint()
    held = client.get(f"/api/annotate/{world.study.pk}/next/").json()["item"]
    other = world.study.items.exclude(pk=held).first().pk
    submit = f"/api/annotate/{world.study.pk}/submit/"
    for body, status in [
        ({"item": other, "position": 0}, 409),  # an item someone else may hold: not theirs
        ({"item": held, "position": 2}, 400),
        ({"item": held, "label": "victory"}, 400),
        ({"item": held, "label": {"ranking": [[0, 1, 1]]}}, 400),
        ({"item": held, "label": {"ranks": [1, "x"]}}, 400),
        ({"item": held, "position": 0, "label": "tie"}, 400),
        ({"item": held, "position": 0, "rationale": "<script>"}, 400),
    ]:
        response = client.post(submit, body, format="json")
        assert response.status_code == status, (body, response.content)
        assert response.status_code < 500
    assert world.fingerprint() == before


def work_through(study, annotator, errors):
    """Claim and answer (each answer twice, like a double click) until the study has nothing left
    for this annotator; an empty queue while other claims are out is looked at again a moment
    later, as a person would: the next pairs appear when the others' answers land."""
    try:
        idle = 0
        while idle < 100:
            assignment = claim_next_item(study, annotator)
            if assignment is None:
                if not PreferenceQuery.objects.filter(study=study, status=PreferenceQuery.Status.OPEN).exists():
                    return
                idle += 1
                time.sleep(0.05)
                continue
            idle = 0
            for _ in range(2):
                submit_judgment(annotator=annotator, item=assignment.item, position=annotator.pk % 2)
    except Exception as exc:
        errors.append(exc)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("rule, options", [("top-k", {"top_k": 2}), ("informative", {"batch": 3})])
def test_racing_annotators_never_push_an_adaptive_query_past_its_budget(rule, options):
    budget = 25
    study = make_preference_study(
        n_queries=2, n_passages=14, design="adaptive", rule=rule, budget=budget, judgments_per_item=2, **options
    )
    annotators = [make_annotator(f"racer{n}") for n in range(5)]
    errors: list[Exception] = []
    threads = [threading.Thread(target=work_through, args=(study, a, errors)) for a in annotators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for state in PreferenceQuery.objects.filter(study=study):
        items = study.items.filter(query=state.query)
        assert state.pairs == items.count() <= budget
        pairs = [frozenset(item.candidates.values_list("passage_id", flat=True)) for item in items]
        assert len(set(pairs)) == len(pairs)  # no pair materialised twice by two racing advances
        assert state.status != PreferenceQuery.Status.OPEN
    positions = list(study.items.values_list("position", flat=True))
    assert len(set(positions)) == len(positions)
    per_item = Judgment.objects.values_list("item_id", flat=True)
    assert max(list(per_item).count(item) for item in set(per_item)) <= 2


def test_a_judges_answer_never_reaches_the_annotator_page_even_after_they_answer(world):
    client = _session(world.attacker)
    for _ in range(3):
        payload = client.get(f"/api/annotate/{world.study.pk}/next/").json()
        if payload["finished"]:
            break
        client.post(
            f"/api/annotate/{world.study.pk}/submit/",
            json.dumps({"item": payload["item"], "label": "tie"}),
            content_type="application/json",
        )
        body = client.get(f"/annotate/{world.study.pk}/").content.decode()
        assert JUDGE_SAYS not in body and not re.search(r"unique_\d", body)
