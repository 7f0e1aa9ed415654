"""How many SQL statements an annotator's requests cost, pinned: the next-item + submit cycle is
what every annotator repeats all day (docs/deployment.md, "Annotators under load"). Before these
budgets a cycle ran 39 statements and checked the annotator's standing three times; now each
request checks it once, in one statement, and skips row locks where SQLite's IMMEDIATE
transactions already serialise writers. Counted through the token-authenticated API, as the load
benchmark calls it. Each request's one transaction shows here as two savepoint statements (the
test's own transaction is around it); a served request runs BEGIN/COMMIT instead."""

import pytest
from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Judgment
from annotation.services.presentation import apply_presentation
from tests.factories import make_annotator, make_relic_proxy_study, next_url, submit_url

pytestmark = pytest.mark.django_db

TRANSACTION = 2  # SAVEPOINT + RELEASE around the request's atomic block
# Statements per request on SQLite, its transaction included; Postgres adds its row locks
# (annotator and item on a claim, item on a submission).
NEXT_CLAIMING = 11 + TRANSACTION
NEXT_RESUMING = 6 + TRANSACTION
# A submission also asks which webhooks listen and whether it completed its item (annotation.events),
# recounts its item's stored live judgments and marks the item for the adjudication queue
# (annotation.services.live_counts: one INSERT, so the queue follows the item instead of the study).
SUBMIT = 11 + TRANSACTION
ROW_LOCKS = {"next": 2, "submit": 1}
CYCLE_BEFORE = 39


def budget(base: int, kind: str) -> int:
    return base + (ROW_LOCKS[kind] if connection.features.has_select_for_update else 0)


@pytest.fixture
def token_client():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=make_annotator()).key}")
    return client


def test_a_next_and_submit_cycle_stays_within_its_statement_budget(token_client, django_assert_max_num_queries):
    study = make_relic_proxy_study(4)
    cycle = budget(NEXT_CLAIMING, "next") + budget(SUBMIT, "submit") - 2 * TRANSACTION
    assert cycle <= 25 < CYCLE_BEFORE  # 22 on SQLite, 25 with Postgres's row locks
    for _ in range(3):  # claiming, answering, claiming the next, ...
        with django_assert_max_num_queries(budget(NEXT_CLAIMING, "next")):
            item = token_client.get(next_url(study)).json()["item"]
        with django_assert_max_num_queries(budget(SUBMIT, "submit")):
            response = token_client.post(submit_url(study), {"item": item, "position": 0}, format="json")
        assert response.status_code == 201


@pytest.mark.parametrize("answer_by", ["position", "candidate"])
def test_a_study_shuffled_per_annotator_records_each_order_within_the_same_budget(
    token_client, django_assert_max_num_queries, answer_by
):
    """The order shown is computed, not stored, when the item is served; the submission reads
    the item's candidates once (the validation then reads them no more) to map the place shown
    to the candidate and record the order, so neither request costs a statement more, whether
    the answer names the place or the candidate's id."""
    study = apply_presentation(make_relic_proxy_study(4), candidate_order="annotator")
    for _ in range(2):
        with django_assert_max_num_queries(budget(NEXT_CLAIMING, "next")):
            payload = token_client.get(next_url(study)).json()
        answer = {"position": 1} if answer_by == "position" else {"candidate": payload["candidates"][1]["id"]}
        with django_assert_max_num_queries(budget(SUBMIT, "submit")):
            response = token_client.post(submit_url(study), {"item": payload["item"], **answer}, format="json")
        assert response.status_code == 201
        judgment = Judgment.objects.get(item_id=payload["item"])
        assert judgment.choice_id == payload["candidates"][1]["id"] and len(judgment.shown_order) == 3


def test_resuming_a_held_item_costs_fewer_statements_than_claiming(token_client, django_assert_max_num_queries):
    study = make_relic_proxy_study(2)
    token_client.get(next_url(study))

    with django_assert_max_num_queries(budget(NEXT_RESUMING, "next")):
        response = token_client.get(next_url(study))

    assert response.status_code == 200 and response.json()["finished"] is False


def test_a_double_submission_costs_no_more_than_the_first(token_client, django_assert_max_num_queries):
    study = make_relic_proxy_study(2)
    item = token_client.get(next_url(study)).json()["item"]
    token_client.post(submit_url(study), {"item": item, "position": 0}, format="json")

    with django_assert_max_num_queries(budget(SUBMIT, "submit")):
        response = token_client.post(submit_url(study), {"item": item, "position": 1}, format="json")

    assert response.status_code == 200 and response.json()["created"] is False
