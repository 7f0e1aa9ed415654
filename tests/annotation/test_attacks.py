"""Attacks on what annotators can see and do. Each test is named after the attack it tries and
asserts the defence: an annotator (signed in, by token, or not signed in at all) reaches only
their own work; never gold, never others' answers, never which model made a candidate; every
judgment is stored exactly once; bad or forged requests get a 4xx and change nothing.

The URL sweeps walk `get_resolver()`: every route not listed below as the annotator's or public
is held to the staff rule (403, or a redirect to sign in), so a route added later is attacked too
and must be opened to annotators on purpose, here."""

from __future__ import annotations

import json
import re
import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import (
    Adjudication,
    AnnotatorFlag,
    AnnotatorProfile,
    Assignment,
    Item,
    Judgment,
    PeerReview,
    QualificationAnswer,
    Study,
    StudyBlock,
)
from annotation.services import claim_next_item, next_work, submit_judgment, void_judgment
from annotation.services.quality import (
    adjudicate,
    block_annotator,
    designate_items,
    next_peer_review,
    sample_for_peer_review,
)
from jobs.models import Job
from retrieval.models import Collection, Passage, Query, Retriever, Run
from tests.factories import (
    add_judgment,
    add_qrels,
    api_client,
    gold_position,
    grant,
    make_annotator,
    make_collection,
    make_label_study,
    make_neighbour_run,
    make_relic_collection,
    make_relic_proxy_study,
    make_scored_run,
    make_text_passages,
    make_text_query,
    make_user,
    next_url,
    submit_url,
)
from tests.routes import routes

pytestmark = pytest.mark.django_db


# --- the world an attacker walks into ------------------------------------------------------------

# Strings that exist in the database but must never reach an annotator: the retriever that made
# the negatives, other people, their timing, what staff wrote about them, what other reviewers said.
# Passage and query external ids are WhatsThatBook-style ("unique_N" is the answer to "q_unique_N").
RETRIEVER_NAME = "leaky-retriever-bm25"
VICTIM, BYSTANDER, STAFF, BLOCKED_OTHER = "victim_annotator", "bystander_annotator", "staff_boss", "banned_annotator"
VICTIM_SECONDS = 987.5
SECRET_TEXTS = (
    "REVIEW-COMMENT-SECRET",
    "VOID-REASON-SECRET",
    "BLOCK-REASON-SECRET",
    "ADJUDICATION-NOTE-SECRET",
    "FLAG-DETAIL-SECRET",
)
# JSON keys that only staff payloads have.
STAFF_ONLY_KEYS = (
    "is_gold",
    "gold",
    "gold_position",
    "source_run",
    "source_rank",
    "sources",
    "all_sources",
    "role",
    "expected_label",
    "expected",
    "correct",
    "annotator",
    "seconds",
    "server_seconds",
    "reviewer",
    "reviews",
    "negatives_run",
    "run",
    "rank",
    "retriever",
    "voided",
    "void_reason",
)


def wtb_style_ids(collection: Collection) -> None:
    """Give every passage and query of the collection BIRCO WhatsThatBook-style ids, where the id
    alone tells which passage answers which query."""
    for passage in Passage.objects.filter(collection=collection):
        Passage.objects.filter(pk=passage.pk).update(external_id=f"unique_{passage.pk}")
    for query in Query.objects.filter(collection=collection):
        Query.objects.filter(pk=query.pk).update(external_id=f"q_unique_{query.pk}")


class World:
    """A proxy study in full swing: hidden gold designated, others' judgments (one voided), a
    review by someone else, an adjudication, a blocked annotator, a flag; and a review of the
    victim's answer waiting for the attacker, on an item the attacker already judged."""

    def __init__(self):
        self.staff = make_user(STAFF, staff=True)
        self.victim, self.bystander = make_annotator(VICTIM), make_annotator(BYSTANDER)
        self.attacker = make_annotator("attacker")
        collection = make_relic_collection(5)
        run = make_neighbour_run(collection)
        Retriever.objects.filter(pk=run.retriever_id).update(name=RETRIEVER_NAME)
        self.study = make_relic_proxy_study(5, collection=collection, run=run, judgments_per_item=3)
        Study.objects.filter(pk=self.study.pk).update(peer_review_rate=1.0)
        self.study.refresh_from_db()
        self.gold_item = designate_items(self.study, Item.Role.GOLD, count=1)[0]
        wtb_style_ids(collection)
        work = list(self.study.items.filter(role=Item.Role.WORK).order_by("position"))
        self.judged_item, self.voided_item = work[0], work[1]
        self.victim_judgment = add_judgment(self.judged_item, self.victim, position=0)
        Judgment.objects.filter(pk=self.victim_judgment.pk).update(seconds=VICTIM_SECONDS)
        add_judgment(self.judged_item, self.bystander, position=1)
        add_judgment(self.judged_item, self.attacker, position=2)
        void_judgment(
            add_judgment(self.voided_item, self.bystander, position=0), by=self.staff, reason="VOID-REASON-SECRET"
        )
        PeerReview.objects.create(
            judgment=self.victim_judgment,
            reviewer=self.bystander,
            verdict="fail",
            comment="REVIEW-COMMENT-SECRET",
            reviewed_at=timezone.now(),
        )
        self.review = PeerReview.objects.create(judgment=self.victim_judgment, reviewer=self.attacker)
        adjudicate(self.judged_item, by=self.staff, position=1, note="ADJUDICATION-NOTE-SECRET")
        banned = make_annotator(BLOCKED_OTHER)
        block_annotator(self.study, banned, by=self.staff, reason="BLOCK-REASON-SECRET")
        self.flag = AnnotatorFlag.objects.create(
            study=self.study,
            annotator=self.victim,
            reason=AnnotatorFlag.Reason.TOO_FAST,
            value=1.0,
            threshold=2.0,
            details={"note": "FLAG-DETAIL-SECRET"},
        )
        self.job = Job.objects.create(kind="run", parameters={"retriever": RETRIEVER_NAME})
        self.run, self.collection = run, collection

    def secrets(self) -> list[str]:
        """Everything in `self.study` an annotator must never read, as it would be written."""
        passages = Passage.objects.filter(collection=self.collection).values_list("external_id", flat=True)
        queries = Query.objects.filter(collection=self.collection).values_list("external_id", flat=True)
        return [
            *passages,
            *queries,
            "unique_",
            RETRIEVER_NAME,
            VICTIM,
            BYSTANDER,
            STAFF,
            BLOCKED_OTHER,
            str(VICTIM_SECONDS),
            *SECRET_TEXTS,
        ]

    def fingerprint(self) -> dict:
        """What an attack could change: compare before and after to prove it changed nothing."""
        return {
            "judgments": sorted(Judgment.objects.values_list("pk", "item_id", "annotator_id", "choice_id", "voided")),
            "roles": sorted(Item.objects.values_list("pk", "role", "expected_label")),
            "reviews": sorted(PeerReview.objects.values_list("pk", "reviewer_id", "verdict", "comment")),
            "blocks": sorted(StudyBlock.objects.values_list("study_id", "annotator_id", "reason")),
            "flags": sorted(AnnotatorFlag.objects.values_list("pk", "resolved_at")),
            "adjudications": sorted(Adjudication.objects.values_list("item_id", "choice_id", "note")),
            "studies": sorted(Study.objects.values_list("pk", "name", "status", "peer_review_rate")),
            "runs": Run.objects.count(),
            "retrievers": Retriever.objects.count(),
            "jobs": sorted(Job.objects.values_list("pk", "status", "cancel_requested")),
            "users": sorted(get_user_model().objects.values_list("pk", "is_staff", "is_active")),
            "profiles": sorted(AnnotatorProfile.objects.values_list("user_id", "blocked")),
        }


def leaks(body: str, secrets: list[str], *, keys: bool = True) -> list[str]:
    """The secrets (and, with `keys`, the staff-only JSON keys) that appear in a response body.
    A finished qualification attempt's own score ("last_attempt": correct of total) is the
    annotator's to see; a "correct" anywhere else would tell them about one answer."""
    found = [secret for secret in secrets if secret in body]
    if keys:
        body = re.sub(r'"last_attempt":\{[^}]*\}', "", body)
        found += [f'"{key}"' for key in STAFF_ONLY_KEYS if f'"{key}"' in body]
    return found


def session_client(user=None, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    if user is not None:
        client.force_login(user)
    return client


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


# --- every route of the project ------------------------------------------------------------------

# What an annotator may call: their own work, their qualification standing, their peer reviews,
# and the API's description (no data).
ANNOTATOR_ROUTES = {
    "home",
    "annotate",
    "qualification_retry",
    "peer_review",
    "api-annotate-next",
    "api-annotate-submit",
    "api-annotate-skip",
    "api-annotate-flag",
    "api-annotate-undo",
    "api-annotate-context",
    "api-annotate-answers",
    "api-annotate-answer",
    "my_answers",
    "answer_revise",
    "item_skip",
    "item_flag",
    "submission_undo",
    "api-qualification",
    "api-peer-review-next",
    "api-peer-review-verdict",
    "api-schema",
    "api-root",
    "api-docs",
}
# What anyone may open: the sign-in pages (the API's token exchange is one), an invitation link
# (its token is the key) and a crowd study link (its slug and the participant's ids are;
# integrations' own attack tests cover them).
PUBLIC_ROUTES = {"login", "admin:login", "invitation_accept", "crowd_entry", "crowd_done", "api-token"}
# Signing out is anyone's right; the sweeps skip it so that the attacker keeps their session.
SKIPPED_ROUTES = {"logout", "admin:logout"}


def is_staff_route(name: str | None) -> bool:
    return name not in ANNOTATOR_ROUTES | PUBLIC_ROUTES | SKIPPED_ROUTES


def concrete_path(name: str | None, template: str, world: World) -> str:
    """The template with real ids: each parameter names an object of the world's study, so a
    refusal is about who asks, never about a missing object."""
    primary_keys = {
        "collection": world.collection.pk,
        "query": Query.objects.filter(collection=world.collection).first().pk,
        "run": world.run.pk,
        "retriever": world.run.retriever_id,
        "job": world.job.pk,
        "api-judgment-void": world.victim_judgment.pk,
        "api-flag-resolve": world.flag.pk,
        "api-item-adjudicate": world.judged_item.pk,
        "api-peer-review-verdict": world.review.pk,
    }
    basename = (name or "").split(":")[-1]
    pk = next(
        (value for key, value in primary_keys.items() if basename == key or basename.startswith(f"{key}-")),
        world.study.pk,
    )
    values = {
        "study_id": world.study.pk,
        "collection_id": world.collection.pk,
        "run_id": world.run.pk,
        "pk": pk,
        "item_id": world.judged_item.pk,
        "query_id": world.judged_item.query_id,
        "flag_id": world.flag.pk,
        "judgment_id": world.victim_judgment.pk,
        "username": VICTIM,
        "kind": "relevance",
        "app_label": "annotation",
        "url": "annotation/judgment/",
        "id": world.victim.pk,
        "object_id": world.victim_judgment.pk,
        "content_type_id": 1,
        "token": "not-an-invitation-token",
        "slug": "not-a-crowd-link",
        "participant": VICTIM,
    }

    def value(match):
        return str(values[match.group(1)])

    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", value, template)
    path = re.sub(r"<(?:\w+:)?(\w+)>", value, path)
    return "/" + path.replace("^", "").replace("$", "")


LOGIN_PAGES = ("/accounts/login/", "/admin/login/")


def refused(client, response, hops: int = 3) -> bool:
    """401/403, or redirects that end on a sign-in page (the admin's own redirects followed)."""
    if response.status_code in (401, 403):
        return True
    if response.status_code != 302 or hops == 0:
        return False
    location = response["Location"].split("?")[0]
    if location in LOGIN_PAGES:
        return True
    return location.startswith("/admin/") and refused(client, client.get(location), hops - 1)


def sweep(client, world: World):
    """GET and POST every route once; yields (name, method, path, response)."""
    for name, template in routes():
        if name in SKIPPED_ROUTES:
            continue
        path = concrete_path(name, template, world)
        for method in ("get", "post"):
            yield name, template, method, path, getattr(client, method)(path, {})


@pytest.fixture
def world():
    return World()


def test_the_routes_opened_to_annotators_still_exist_so_the_sweeps_cover_what_they_name():
    names = {name for name, _ in routes()}
    assert names >= ANNOTATOR_ROUTES | PUBLIC_ROUTES | SKIPPED_ROUTES


def test_anonymous_callers_reach_nothing_but_the_sign_in_pages_on_any_route(world):
    before = world.fingerprint()
    client = session_client()
    for name, template, method, path, response in sweep(client, world):
        if name in PUBLIC_ROUTES:
            assert response.status_code < 500, (method, path)
            assert not leaks(response.content.decode(errors="replace"), world.secrets(), keys=False), (method, path)
            continue
        assert refused(client, response), (
            f"anonymous {method.upper()} {path} ({template}) answered {response.status_code}"
        )
    assert world.fingerprint() == before


@pytest.mark.parametrize("authentication", ["session", "token"])
def test_an_annotator_is_refused_on_every_staff_route_and_changes_nothing(world, authentication):
    client = session_client(world.attacker) if authentication == "session" else token_client(world.attacker)
    before = world.fingerprint()
    for name, template, method, path, response in sweep(client, world):
        if not is_staff_route(name):
            continue
        assert refused(client, response) and response.status_code != 401, (
            f"annotator {method.upper()} {path} ({template}) answered {response.status_code}"
        )
    assert world.fingerprint() == before  # the annotator's own routes in the sweep may claim work, no more


@pytest.mark.parametrize("authentication", ["session", "token"])
def test_what_an_annotator_can_reach_names_no_gold_no_model_and_nobody_else(world, authentication):
    client = session_client(world.attacker) if authentication == "session" else token_client(world.attacker)
    secrets = world.secrets()
    reached = []
    for name, _template, method, path, response in sweep(client, world):
        if is_staff_route(name):
            continue
        assert response.status_code < 500, (method, path)
        body = response.content.decode(errors="replace")
        is_data = response.get("Content-Type", "").startswith("application/json")  # not the schema, not a page
        found = leaks(body, secrets, keys=is_data)
        assert not found, f"{method.upper()} {path} leaked {found}"
        reached.append((name, method, response.status_code))
    # The sweep did reach the attacker's own work: the item, the review of the victim's answer.
    assert ("api-annotate-next", "get", 200) in reached and ("api-peer-review-next", "get", 200) in reached
    assert PeerReview.objects.get(pk=world.review.pk).verdict is None  # the sweep's empty verdict was refused


# --- IDOR: items, claims and studies that are not the attacker's ------------------------------------


def test_submitting_to_an_item_someone_else_holds_is_refused_and_their_claim_stands():
    study = make_relic_proxy_study(2)
    victim, attacker = make_annotator(), make_annotator()
    held = claim_next_item(study, victim)
    response = api_client(attacker).post(submit_url(study), {"item": held.item_id, "position": 0}, format="json")
    assert response.status_code == 409 and "no claim" in response.json()["detail"]
    held.refresh_from_db()
    assert held.state == Assignment.State.ACTIVE and held.annotator == victim
    assert not Judgment.objects.exists()


def test_submitting_an_item_of_another_study_through_this_study_is_refused():
    mine, theirs = make_relic_proxy_study(1), make_relic_proxy_study(1)
    attacker = make_annotator()
    foreign_item = claim_next_item(theirs, attacker).item
    client = api_client(attacker)
    response = client.post(submit_url(mine), {"item": foreign_item.pk, "position": 0}, format="json")
    assert response.status_code == 400 and "item" in response.json()
    page = session_client(attacker).post(f"/annotate/{mine.pk}/", {"item": foreign_item.pk, "choice": 0}, follow=True)
    assert "That item is not part of this study." in page.content.decode()
    assert not Judgment.objects.exists()


def test_a_guessed_gold_item_id_is_refused_exactly_like_a_guessed_work_item():
    study = make_relic_proxy_study(4)
    gold_item = designate_items(study, Item.Role.GOLD, count=1)[0]
    work_item = study.items.filter(role=Item.Role.WORK).first()
    client = api_client(make_annotator())
    answers = [
        client.post(submit_url(study), {"item": item.pk, "position": 0}, format="json")
        for item in (gold_item, work_item)
    ]
    assert [a.status_code for a in answers] == [409, 409]
    assert answers[0].json() == answers[1].json()
    assert not Judgment.objects.exists()


@pytest.mark.parametrize("probe", [{"position": 0}, {"position": 7}, {"candidate": 0}, {"label": 1}])
def test_probing_an_item_one_does_not_hold_learns_nothing_about_its_answer_shape(probe):
    study = make_relic_proxy_study(2)
    item = study.items.first()
    if "candidate" in probe:
        probe = {"candidate": item.candidates.get(position=0).pk}
    response = api_client(make_annotator()).post(submit_url(study), {"item": item.pk, **probe}, format="json")
    # Whatever was sent, the answer is the same refusal: no claim, not "no candidate at position 7".
    assert response.status_code == 409 and response.json() == {"detail": "you hold no claim on this item"}


def qualification_study(questions: int = 3) -> Study:
    study = make_relic_proxy_study(questions + 2)
    Study.objects.filter(pk=study.pk).update(qualification_threshold=0.5, qualification_attempts=2)
    study.refresh_from_db()
    designate_items(study, Item.Role.QUALIFICATION, count=questions)
    return study


def test_answering_a_qualification_question_outside_an_open_attempt_stores_nothing():
    study = qualification_study()
    question = study.items.filter(role=Item.Role.QUALIFICATION).first()
    newcomer = api_client(make_annotator())  # asked for nothing yet: no attempt is open
    response = newcomer.post(submit_url(study), {"item": question.pk, "position": 0}, format="json")
    assert response.status_code == 409 and "no qualification attempt is open" in response.json()["detail"]
    without_round = make_relic_proxy_study(3)
    stray = designate_items(without_round, Item.Role.QUALIFICATION, count=1)[0]
    response = newcomer.post(submit_url(without_round), {"item": stray.pk, "position": 0}, format="json")
    assert response.status_code == 409
    assert not QualificationAnswer.objects.exists() and not Judgment.objects.exists()


def test_two_annotators_one_right_one_wrong_get_the_same_responses_until_the_attempt_ends():
    study = qualification_study()
    seen = []
    for right in (True, False):
        client = api_client(make_annotator())
        question = client.get(next_url(study)).json()["item"]
        position = gold_position(question) if right else (gold_position(question) + 1) % 3
        receipt = client.post(submit_url(study), {"item": question, "position": position}, format="json").json()
        status = client.get(f"/api/annotate/{study.pk}/qualification/").json()
        following = client.get(next_url(study)).json()
        seen.append((receipt["qualification"], sorted(receipt), status, following["qualification"], sorted(following)))
    assert seen[0] == seen[1]
    assert "correct" not in json.dumps(seen[0][1]) and seen[0][0]["last_attempt"] is None


# --- peer review: neither whose answer, nor a bias on one's own --------------------------------------


def test_a_reviewer_is_never_sent_an_answer_to_an_item_they_may_still_judge():
    study = make_relic_proxy_study(3, judgments_per_item=2)
    Study.objects.filter(pk=study.pk).update(peer_review_rate=1.0)
    study.refresh_from_db()
    author, reviewer = make_annotator("author"), make_annotator("reviewer")
    study.annotators.set([author, reviewer])
    first = claim_next_item(study, author).item
    submit_judgment(annotator=author, item=first, position=0)
    # The reviewer has not judged the item and the queue would still give it to them.
    assert sample_for_peer_review(study, seed=1) == {"assigned": 0, "unassigned": 1, "reviews": 0}
    assert next_peer_review(study, reviewer)["finished"] is True
    # Once they have given their own answer, they may review the author's.
    while (assignment := claim_next_item(study, reviewer)) is not None:
        submit_judgment(annotator=reviewer, item=assignment.item, position=1)
    sample_for_peer_review(study, seed=1)
    assert PeerReview.objects.filter(reviewer=reviewer, judgment__item=first).exists()


def test_an_item_whose_answer_a_reviewer_saw_is_never_served_to_them_later():
    study = make_relic_proxy_study(1, judgments_per_item=2)
    author, bystander, reviewer = make_annotator(), make_annotator(), make_annotator()
    judgments = [
        submit_judgment(annotator=person, item=claim_next_item(study, person).item, position=0).judgment
        for person in (author, bystander)
    ]
    PeerReview.objects.create(judgment=judgments[0], reviewer=reviewer)  # the item was full: nothing to bias
    assert next_peer_review(study, reviewer)["finished"] is False
    void_judgment(judgments[1], by=None, reason="spam")  # a slot opens again
    assert claim_next_item(study, reviewer) is None
    assert next_work(study, reviewer)["finished"] is True


def pending_review_world(names=("ann", "ben")):
    """A finished two-annotator item whose two judgments each wait for the other's verdict."""
    study = make_relic_proxy_study(1, judgments_per_item=2)
    Study.objects.filter(pk=study.pk).update(peer_review_rate=1.0)
    study.refresh_from_db()
    people = [make_annotator(name) for name in names]
    for person in people:
        submit_judgment(annotator=person, item=claim_next_item(study, person).item, position=0)
    study.annotators.set(people)
    sample_for_peer_review(study, seed=1)
    return study, *people


def test_a_verdict_posted_on_the_review_page_for_someone_elses_review_is_refused():
    study, ann, ben = pending_review_world()
    bens_review = PeerReview.objects.get(reviewer=ben)  # ben reviews ann's answer
    response = session_client(ann).post(f"/studies/{study.pk}/review/", {"review": bens_review.pk, "verdict": "fail"})
    assert response.status_code == 403 and "someone else" in response.content.decode()
    bens_review.refresh_from_db()
    assert bens_review.verdict is None


def test_a_review_of_another_study_cannot_be_answered_through_this_studys_page():
    _study, ann, _ben = pending_review_world()
    other = make_relic_proxy_study(1)
    own_review = PeerReview.objects.get(reviewer=ann)
    page = session_client(ann).post(
        f"/studies/{other.pk}/review/", {"review": own_review.pk, "verdict": "pass"}, follow=True
    )
    assert "That review is not part of this study." in page.content.decode()
    own_review.refresh_from_db()
    assert own_review.verdict is None


def test_the_review_page_and_payload_name_neither_the_author_nor_the_other_reviews():
    study, _author, first_reviewer = pending_review_world(names=(VICTIM, BYSTANDER))
    reviewed = PeerReview.objects.get(reviewer=first_reviewer)
    PeerReview.objects.filter(pk=reviewed.pk).update(
        verdict="fail", comment="REVIEW-COMMENT-SECRET", reviewed_at=timezone.now()
    )
    attacker = make_annotator("attacker")
    study.annotators.add(attacker)
    PeerReview.objects.create(judgment=reviewed.judgment, reviewer=attacker)
    page = session_client(attacker).get(f"/studies/{study.pk}/review/")
    payload = api_client(attacker).get(f"/api/annotate/{study.pk}/peer-review/next/")
    assert page.status_code == payload.status_code == 200 and payload.json()["answer"]["position"] == 0
    for body in (page.content.decode(), payload.content.decode()):
        assert not leaks(body, [VICTIM, BYSTANDER, "REVIEW-COMMENT-SECRET"], keys=False)
    assert not leaks(payload.content.decode(), [], keys=True)


# --- what the payloads and pages give away -------------------------------------------------------


def test_candidate_ids_follow_the_display_order_so_they_cannot_point_at_the_gold():
    study = make_relic_proxy_study(6, candidates=4)
    client = api_client(make_annotator())
    gold_positions = set()
    while not (payload := client.get(next_url(study)).json())["finished"]:
        ids = [candidate["id"] for candidate in payload["candidates"]]
        assert ids == sorted(ids) and [c["position"] for c in payload["candidates"]] == list(range(4))
        gold_positions.add(gold_position(payload["item"]))
        client.post(submit_url(study), {"item": payload["item"], "position": 0}, format="json")
    assert len(gold_positions) > 1  # the gold moves about, and nothing in the ids follows it


def wtb_relevance_study() -> Study:
    """A relevance study over a collection with WhatsThatBook-style ids, with a qualification
    question and a hidden gold item, spans on the passage and an optional rationale."""
    from annotation.services import create_relevance_study

    collection = make_collection()
    passages = make_text_passages(collection, [f"Blurb {n} of a book somebody half remembers." for n in range(4)])
    queries = [make_text_query(collection, f"Post {n} about a half-remembered book.") for n in range(2)]
    for number, query in enumerate(queries):
        add_qrels(query, {passages[number]: 1})
    wtb_style_ids(collection)
    run = make_scored_run(
        collection, {query: {p: -abs(i - n) for i, p in enumerate(passages)} for n, query in enumerate(queries)}
    )
    study = create_relevance_study(
        name="wtb",
        collection=collection,
        runs=[run],
        depth=2,
        judgments_per_item=2,
        seed=1,
        label_schema={"spans": "passage", "rationale": "optional"},
    ).study
    Study.objects.filter(pk=study.pk).update(qualification_threshold=1.0)
    study.refresh_from_db()
    question, gold = study.items.order_by("position")[:2]
    designate_items(study, Item.Role.QUALIFICATION, items=[question], expected={question.pk: 1})
    designate_items(study, Item.Role.GOLD, items=[gold], expected={gold.pk: 0})
    return study


def test_birco_style_ids_never_reach_an_annotator_of_a_relevance_study():
    study = wtb_relevance_study()
    attacker = make_annotator("attacker")
    client, browser = api_client(attacker), session_client(attacker)
    bodies = []
    for _ in range(study.items.count() + 1):
        page = browser.get(f"/annotate/{study.pk}/")
        payload = client.get(next_url(study))
        bodies += [(page.content.decode(), False), (payload.content.decode(), True)]
        if payload.json()["finished"]:
            break
        receipt = client.post(submit_url(study), {"item": payload.json()["item"], "label": 1}, format="json")
        bodies.append((receipt.content.decode(), True))
    assert payload.json()["finished"] is True and len(bodies) > 6
    for body, is_json in bodies:
        assert not leaks(body, ["unique_"], keys=is_json), body[:300]


# --- judgments are stored once, as first given ----------------------------------------------------


def test_resubmitting_a_different_label_keeps_the_first_answer():
    study = make_label_study(items=1, label_schema={"rationale": "optional"})
    client = api_client(make_annotator())
    item = client.get(next_url(study)).json()["item"]
    first = client.post(submit_url(study), {"item": item, "label": 1, "rationale": "first"}, format="json")
    again = client.post(submit_url(study), {"item": item, "label": 0, "rationale": "changed my mind"}, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["label"] == 1 and again.json()["rationale"] == "first" and again.json()["created"] is False
    assert list(Judgment.objects.values_list("label", "rationale")) == [(1, "first")]


def test_a_submission_for_a_claim_that_expired_while_others_filled_the_item_is_refused():
    study = make_relic_proxy_study(1, judgments_per_item=1)
    slow, fast = make_annotator(), make_annotator()
    held = claim_next_item(study, slow)
    Assignment.objects.filter(pk=held.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    submit_judgment(annotator=fast, item=claim_next_item(study, fast).item, position=1)
    response = api_client(slow).post(submit_url(study), {"item": held.item_id, "position": 0}, format="json")
    assert response.status_code == 409 and "expired" in response.json()["detail"]
    assert list(Judgment.objects.values_list("annotator", flat=True)) == [fast.pk]


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_identical_submissions_over_http_stores_exactly_one_judgment():
    study = make_relic_proxy_study(1)
    attacker = make_annotator()
    item = claim_next_item(study, attacker).item
    statuses, errors = [], []

    def submit(position):
        try:
            response = api_client(attacker).post(
                submit_url(study), {"item": item.pk, "position": position}, format="json"
            )
            statuses.append((response.status_code, response.json()["position"]))
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(n % 3,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stored = Judgment.objects.get()  # exactly one
    assert sorted(code for code, _ in statuses) == [200] * 5 + [201]
    assert {position for _, position in statuses} == {stored.choice.position}  # everyone is told the one stored


# --- CSRF: a signed-in annotator's browser cannot be made to post for them -------------------------


def reviewer_with_work():
    """An annotator with a review waiting in one study and items to claim in another."""
    review_study, reviewer, _ = pending_review_world()
    return make_relic_proxy_study(2), review_study, reviewer


def test_page_forms_refuse_posts_without_the_csrf_token():
    work_study, review_study, reviewer = reviewer_with_work()
    browser = session_client(reviewer, csrf=True)
    item = claim_next_item(work_study, reviewer).item
    review = PeerReview.objects.get(reviewer=reviewer)
    forged = [
        (f"/annotate/{work_study.pk}/", {"item": item.pk, "choice": 0}),
        (f"/annotate/{work_study.pk}/qualification/retry/", {}),
        (f"/studies/{review_study.pk}/review/", {"review": review.pk, "verdict": "fail"}),
        ("/accounts/logout/", {}),
    ]
    for path, data in forged:
        assert browser.post(path, data).status_code == 403, path
    assert not Judgment.objects.filter(item=item).exists()
    assert PeerReview.objects.get(pk=review.pk).verdict is None
    assert browser.get("/").status_code == 200  # still signed in: the forged logout did nothing
    # The page's own form carries the token, and with it the same post goes through.
    page = browser.get(f"/annotate/{work_study.pk}/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    posted = browser.post(f"/annotate/{work_study.pk}/", {"item": item.pk, "choice": 0, "csrfmiddlewaretoken": token})
    assert posted.status_code == 302 and Judgment.objects.filter(item=item, annotator=reviewer).exists()


def test_the_json_api_under_a_session_refuses_posts_without_the_csrf_token():
    work_study, _review_study, reviewer = reviewer_with_work()
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(reviewer)
    item = client.get(next_url(work_study)).json()["item"]
    review = PeerReview.objects.get(reviewer=reviewer)
    forged = [
        (submit_url(work_study), {"item": item, "position": 0}),
        (next_url(work_study), {}),
        (f"/api/peer-reviews/{review.pk}/", {"verdict": "fail"}),
    ]
    for path, data in forged:
        response = client.post(path, data, format="json")
        assert response.status_code == 403 and "CSRF" in response.json()["detail"], path
    assert not Judgment.objects.filter(item_id=item).exists() and PeerReview.objects.get(pk=review.pk).verdict is None
    client.get(f"/annotate/{work_study.pk}/")  # any page sets the csrftoken cookie the JavaScript sends back
    response = client.post(
        submit_url(work_study),
        {"item": item, "position": 0},
        format="json",
        HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value,
    )
    assert response.status_code == 201


def test_token_authentication_is_not_cookie_borne_so_it_needs_no_csrf_token():
    study = make_relic_proxy_study(1)
    client = token_client(make_annotator())
    item = client.get(next_url(study)).json()["item"]
    assert client.post(submit_url(study), {"item": item, "position": 0}, format="json").status_code == 201


# --- blocked and inactive annotators get nothing, give nothing ---------------------------------------


def block(study, annotator, how: str) -> None:
    if how == "everywhere":
        AnnotatorProfile.objects.filter(user=annotator).update(blocked=True, blocked_reason="spam")
    else:
        block_annotator(study, annotator, by=None, reason="spam")


@pytest.mark.parametrize("how", ["everywhere", "from_the_study"])
def test_a_blocked_annotator_gets_and_gives_nothing_through_any_path(how):
    study = make_relic_proxy_study(2, judgments_per_item=2)
    Study.objects.filter(pk=study.pk).update(peer_review_rate=1.0)
    study.refresh_from_db()
    ann, attacker = make_annotator("ann"), make_annotator("attacker")
    for person in (ann, attacker, ann):  # both judge one item; ann judges the other as well
        submit_judgment(annotator=person, item=claim_next_item(study, person).item, position=0)
    held = claim_next_item(study, attacker)
    sample_for_peer_review(study, seed=1)
    review = PeerReview.objects.get(reviewer=attacker)
    block(study, attacker, how)
    judgments_before = sorted(Judgment.objects.values_list("pk", flat=True))

    browser, client = session_client(attacker), token_client(attacker)  # each request loads the user afresh
    answer = {"item": held.item_id, "choice": 0}
    page_attempts = [
        browser.get(f"/annotate/{study.pk}/"),
        browser.post(f"/annotate/{study.pk}/", answer, follow=True),
        browser.post(f"/annotate/{study.pk}/qualification/retry/", follow=True),
        browser.get(f"/studies/{study.pk}/review/"),
        browser.post(f"/studies/{study.pk}/review/", {"review": review.pk, "verdict": "pass"}, follow=True),
    ]
    api_attempts = [
        client.get(next_url(study)),
        client.post(next_url(study)),
        client.post(submit_url(study), {"item": held.item_id, "position": 0}, format="json"),
        client.get(f"/api/annotate/{study.pk}/peer-review/next/"),
        client.post(f"/api/peer-reviews/{review.pk}/", {"verdict": "pass"}, format="json"),
    ]
    assert [response.status_code for response in page_attempts] == [403] * 5
    # A block from the study withdraws the pending review itself: it is then simply not found.
    assert [response.status_code for response in api_attempts[:4]] == [403] * 4
    assert api_attempts[4].status_code == (403 if how == "everywhere" else 404)
    assert "blocked" in client.get(f"/api/annotate/{study.pk}/qualification/").json()["refusal"]
    assert sorted(Judgment.objects.values_list("pk", flat=True)) == judgments_before
    assert not PeerReview.objects.filter(reviewer=attacker, verdict__isnull=False).exists()


def test_a_blocked_annotator_cannot_answer_the_qualification_question_they_were_shown():
    study = qualification_study()
    attacker = make_annotator()
    client = api_client(attacker)
    question = client.get(next_url(study)).json()["item"]
    block(study, attacker, "from_the_study")
    response = client.post(submit_url(study), {"item": question, "position": gold_position(question)}, format="json")
    assert response.status_code == 403 and not QualificationAnswer.objects.exists()


def test_an_inactive_annotator_is_treated_as_signed_out_by_session_and_by_token():
    study = make_relic_proxy_study(1)
    attacker = make_annotator()
    browser, client = session_client(attacker), token_client(attacker)
    get_user_model().objects.filter(pk=attacker.pk).update(is_active=False)
    assert refused(browser, browser.get(f"/annotate/{study.pk}/"))
    assert browser.get(next_url(study)).status_code == 403
    assert client.get(next_url(study)).status_code in (401, 403)
    assert not Assignment.objects.exists()


# --- what an annotator writes cannot run in someone else's page ---------------------------------------


def test_an_annotators_rationale_cannot_inject_markup_into_staff_or_reviewer_pages():
    from tests.factories import make_plot_relevance_study

    study = make_plot_relevance_study(label_schema={"rationale": "optional"}, depth=1, n_queries=1)
    Study.objects.filter(pk=study.pk).update(peer_review_rate=1.0)
    study.refresh_from_db()
    author, other = make_annotator("author"), make_annotator("other")
    payload = "<script>alert('stolen')</script><img src=x onerror=alert(1)>"
    for person, label in ((author, 1), (other, 0)):
        item = claim_next_item(study, person).item
        submit_judgment(annotator=person, item=item, label=label, rationale=payload)
    sample_for_peer_review(study, seed=1)
    pages = [
        session_client(other).get(f"/studies/{study.pk}/review/"),
        session_client(make_user(staff=True)).get(f"/studies/{study.pk}/adjudicate/{item.pk}/"),
    ]
    for page in pages:
        html = page.content.decode()
        assert page.status_code == 200 and "&lt;script&gt;alert(" in html
        assert "<script>alert(" not in html and "<img src=x" not in html


# --- the adjudication workspace: adjudicators see answers, annotators never do ----------------------

# The workspace's routes: what an account with the adjudicate permission (not staff) may open.
ADJUDICATOR_ROUTES = {
    "study_adjudicate",
    "adjudication_next",
    "item_adjudicate",
    "item_send_back",
    "api-adjudication-queue",
    "api-adjudication-next",
    "api-adjudication-item",
    "api-adjudication-decide",
    "api-adjudication-send-back",
    "api-adjudication-reasons",
    "api-adjudication-global-reasons",
}
# Keys of staff's payloads that an adjudicator's must not carry: annotators' names ("name"), the
# gold, the item's known answer or role, where candidates came from, the query's external id.
ADJUDICATOR_HIDDEN_KEYS = (
    "name",
    "is_gold",
    "gold",
    "gold_position",
    "source_run",
    "source_rank",
    "sources",
    "role",
    "expected_label",
    "query",
    "retriever",
)


def adjudicator_in(world: World):
    """An account with the adjudicate permission, kept from annotating the world's study (which
    is open to every annotator) so that it may adjudicate it."""
    adjudicator = grant(make_user("adjudicator_not_staff"), "annotation.adjudicate")
    block_annotator(world.study, adjudicator, by=world.staff, reason="adjudicates", exclude_judgments=False)
    return adjudicator


def test_the_workspace_routes_still_exist_so_the_sweeps_cover_them():
    assert {name for name, _ in routes()} >= ADJUDICATOR_ROUTES


@pytest.mark.parametrize("authentication", ["session", "token"])
def test_an_annotator_reaches_no_answer_decision_or_reason_of_the_workspace(world, authentication):
    client = session_client(world.attacker) if authentication == "session" else token_client(world.attacker)
    before = world.fingerprint()
    for name, _template, method, path, response in sweep(client, world):
        if name not in ADJUDICATOR_ROUTES:
            continue
        assert refused(client, response) and response.status_code != 401, (method, path, response.status_code)
        assert not leaks(response.content.decode(errors="replace"), world.secrets(), keys=False), (method, path)
    assert world.fingerprint() == before


@pytest.mark.parametrize("authentication", ["session", "token"])
def test_an_adjudicator_who_is_not_staff_reaches_only_the_workspace_and_no_names_or_gold(world, authentication):
    adjudicator = adjudicator_in(world)
    client = session_client(adjudicator) if authentication == "session" else token_client(adjudicator)
    before = world.fingerprint()
    secrets = [
        *(
            secret
            for secret in world.secrets()
            if secret not in (str(VICTIM_SECONDS), STAFF, "ADJUDICATION-NOTE-SECRET")
        ),
        "attacker",
    ]
    reached = set()
    for name, template, method, path, response in sweep(client, world):
        if name in ADJUDICATOR_ROUTES:
            assert response.status_code < 500, (method, path)
            body = response.content.decode(errors="replace")
            found = [secret for secret in secrets if secret in body]
            found += [key for key in ADJUDICATOR_HIDDEN_KEYS if f'"{key}"' in body]
            assert not found, f"{method.upper()} {path} showed {found}"
            if response.status_code == 200:
                reached.add(name)
        elif is_staff_route(name):
            assert refused(client, response) and response.status_code != 401, (
                f"adjudicator {method.upper()} {path} ({template}) answered {response.status_code}"
            )
    pages = {"study_adjudicate", "item_adjudicate"} if authentication == "session" else set()
    assert {*pages, "api-adjudication-item", "api-adjudication-queue", "api-adjudication-next"} <= reached
    assert world.fingerprint() == before  # empty posts decided nothing, sent nothing back


def test_an_adjudicator_who_judged_in_a_study_or_may_still_judge_it_is_refused_there(world):
    """The world's study is open to every annotator: the attacker judged in it, and a fresh
    adjudicator could be served its items; both are refused, over the pages and the API."""
    judged_there = grant(world.attacker, "annotation.adjudicate")
    may_judge = grant(make_user("fresh_adjudicator"), "annotation.adjudicate")
    pages = (f"/studies/{world.study.pk}/adjudicate/", f"/studies/{world.study.pk}/adjudicate/{world.judged_item.pk}/")
    api = (
        f"/api/studies/{world.study.pk}/adjudication/items/{world.judged_item.pk}/",
        f"/api/studies/{world.study.pk}/adjudication/queue/",
    )
    tokens = {person: token_client(person) for person in (judged_there, may_judge)}
    for person in (judged_there, may_judge):
        for client, paths in ((session_client(person), pages), (tokens[person], api)):
            for path in paths:
                response = client.get(path)
                assert response.status_code == 403, (person.username, path)
                assert VICTIM not in response.content.decode() and BYSTANDER not in response.content.decode()
    decided = tokens[may_judge].post(
        f"/api/studies/{world.study.pk}/adjudication/items/{world.judged_item.pk}/decide/",
        {"position": 0, "reason": "Annotator error"},
        format="json",
    )
    assert decided.status_code == 403
    assert Adjudication.objects.get(item=world.judged_item).choice.position == 1  # staff's decision stands


def test_an_adjudicator_cannot_reach_a_gold_item_or_another_studys_item_through_the_workspace(world):
    adjudicator = adjudicator_in(world)
    other = make_relic_proxy_study(1)
    client = token_client(adjudicator)
    base = f"/api/studies/{world.study.pk}/adjudication/items"
    for item in (world.gold_item, other.items.get()):
        assert client.get(f"{base}/{item.pk}/").status_code == 404
        decided = client.post(f"{base}/{item.pk}/decide/", {"position": 0, "reason": "Broken item"}, format="json")
        assert decided.status_code == 404
    assert not Adjudication.objects.filter(item__in=[world.gold_item, other.items.get()]).exists()


# --- going back to earlier answers: only one's own, only where the study allows it -------------------


def revision_world():
    """A relevance study that allows revisions: the victim and the attacker each answered the
    first item on the web, the victim alone the second."""
    study = make_label_study(
        items=3, judgments_per_item=2, label_schema={"rationale": "optional"}, allow_revisions=True
    )
    victim, attacker = make_annotator(VICTIM), make_annotator("attacker")
    first, second = study.items.order_by("position")[:2]
    for person, item, rationale in (
        (victim, first, "VICTIM-RATIONALE"),
        (attacker, first, "mine"),
        (victim, second, ""),
    ):
        Assignment.objects.create(
            item=item,
            annotator=person,
            slot=Assignment.objects.filter(item=item).count(),
            expires_at=timezone.now() + timedelta(minutes=5),
        )
        submit_judgment(annotator=person, item=item, label=1, rationale=rationale)
    return study, victim, attacker, first, second


def test_the_revision_routes_reach_only_the_annotators_own_answers():
    study, victim, attacker, shared, victims_only = revision_world()
    before = sorted(Judgment.objects.values_list("pk", "label", "rationale", "revision"))
    client, browser = api_client(attacker), session_client(attacker)
    listing = client.get(f"/api/annotate/{study.pk}/answers/")
    assert [row["item"] for row in listing.json()["results"]] == [shared.pk]
    # The victim's answer to an item the attacker did not judge: 404 whatever the method.
    for response in (
        client.get(f"/api/annotate/{study.pk}/answers/{victims_only.pk}/"),
        client.post(f"/api/annotate/{study.pk}/answers/{victims_only.pk}/", {"label": 0}, format="json"),
        browser.get(f"/annotate/{study.pk}/answers/{victims_only.pk}/"),
        browser.post(f"/annotate/{study.pk}/answers/{victims_only.pk}/", {"label": "0"}),
    ):
        assert response.status_code == 404
    assert sorted(Judgment.objects.values_list("pk", "label", "rationale", "revision")) == before
    # On the item both judged, the attacker reads and revises their own answer, never the victim's.
    shown = client.get(f"/api/annotate/{study.pk}/answers/{shared.pk}/")
    page = browser.get(f"/annotate/{study.pk}/answers/{shared.pk}/")
    for body, is_json in (
        (shown.content.decode(), True),
        (page.content.decode(), False),
        (listing.content.decode(), True),
    ):
        assert not leaks(body, [VICTIM, "VICTIM-RATIONALE", STAFF], keys=is_json), body[:300]
    assert shown.json()["answer"]["rationale"] == "mine"
    client.post(f"/api/annotate/{study.pk}/answers/{shared.pk}/", {"label": 0}, format="json")
    assert Judgment.objects.get(item=shared, annotator=victim).label == 1
    assert Judgment.objects.get(item=shared, annotator=attacker).label == 0


def test_the_revision_routes_refuse_where_the_study_does_not_allow_revisions():
    study, _victim, attacker, shared, _ = revision_world()
    Study.objects.filter(pk=study.pk).update(allow_revisions=False)
    client, browser = api_client(attacker), session_client(attacker)
    responses = [
        client.get(f"/api/annotate/{study.pk}/answers/"),
        client.get(f"/api/annotate/{study.pk}/answers/{shared.pk}/"),
        client.post(f"/api/annotate/{study.pk}/answers/{shared.pk}/", {"label": 0}, format="json"),
        browser.get(f"/annotate/{study.pk}/answers/"),
        browser.post(f"/annotate/{study.pk}/answers/{shared.pk}/", {"label": "0"}),
    ]
    assert [response.status_code for response in responses] == [403] * 5
    assert "does not let annotators revise" in responses[0].json()["detail"]
    assert Judgment.objects.get(item=shared, annotator=attacker).label == 1


def test_a_blocked_or_signed_out_annotator_reaches_no_answer():
    study, _victim, attacker, shared, _ = revision_world()
    block_annotator(study, attacker, by=None, reason="spam")
    assert api_client(attacker).get(f"/api/annotate/{study.pk}/answers/").status_code == 403
    assert (
        api_client(attacker)
        .post(f"/api/annotate/{study.pk}/answers/{shared.pk}/", {"label": 0}, format="json")
        .status_code
        == 403
    )
    anonymous = session_client()
    assert refused(anonymous, anonymous.get(f"/annotate/{study.pk}/answers/"))
    assert api_client().get(f"/api/annotate/{study.pk}/answers/").status_code in (401, 403)
    assert Judgment.objects.get(item=shared, annotator=attacker).label == 1


def test_an_item_of_another_study_named_through_this_study_is_nobodys_answer_here():
    study, _victim, attacker, _shared, _ = revision_world()
    elsewhere = make_label_study(items=1, judgments_per_item=1, allow_revisions=True)
    item = elsewhere.items.get()
    Assignment.objects.create(item=item, annotator=attacker, slot=0, expires_at=timezone.now() + timedelta(minutes=5))
    submit_judgment(annotator=attacker, item=item, label=1)
    client = api_client(attacker)
    assert client.get(f"/api/annotate/{study.pk}/answers/{item.pk}/").status_code == 404
    assert client.post(f"/api/annotate/{study.pk}/answers/{item.pk}/", {"label": 0}, format="json").status_code == 404
    assert Judgment.objects.get(item=item).label == 1
