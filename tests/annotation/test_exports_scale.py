"""Every export streams at paper scale: a 10K-item proxy study (30K judgments, 30K hits) exports
its items, judgments (command and REST, every format), run (command and REST) with a fixed
number of queries, none of whose SQL grows with the study. Before, `export_study` stopped on
SQLite at 3,000 items with "Expression tree is too large" (an IN list of every item)."""

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import api_client, make_bulk_proxy_study, make_user, response_text

pytestmark = pytest.mark.django_db

ITEMS = 10_000
LONGEST_SQL = 4000  # characters: fixed queries (an IN list of 10K ids would be ~60K)


def command_output(name: str, *args) -> str:
    out = io.StringIO()
    call_command(name, *map(str, args), stdout=out)
    return out.getvalue()


def assert_constant_queries(context: CaptureQueriesContext, at_most: int) -> None:
    assert len(context.captured_queries) <= at_most, len(context.captured_queries)
    longest = max(len(query["sql"]) for query in context.captured_queries)
    assert longest <= LONGEST_SQL, longest


def test_a_ten_thousand_item_study_exports_everything_in_streams():
    study = make_bulk_proxy_study(ITEMS, seed=3)
    staff = api_client(make_user(staff=True))

    with CaptureQueriesContext(connection) as queries:
        items = [json.loads(line) for line in command_output("export_study", study.pk).splitlines()]
    assert_constant_queries(queries, 10)
    assert len(items) == ITEMS
    assert [row["query"] for row in items[:2]] == ["q0", "q1"] and items[-1]["query"] == f"q{ITEMS - 1}"
    assert all(len(row["candidates"]) == 3 and row["gold"] in row["candidates"] for row in items)

    with CaptureQueriesContext(connection) as queries:
        judgments = [json.loads(line) for line in command_output("export_judgments", study.pk).splitlines()]
    assert_constant_queries(queries, 25)
    assert len(judgments) == 3 * ITEMS and len({row["judgment"] for row in judgments}) == 3 * ITEMS

    as_csv = list(csv.DictReader(io.StringIO(response_text(staff.get(f"/api/judgments/?study={study.pk}&format=csv")))))
    as_json = json.loads(response_text(staff.get(f"/api/judgments/?study={study.pk}")))
    as_jsonl = response_text(staff.get(f"/api/judgments/?study={study.pk}&format=jsonl")).splitlines()
    assert len(as_csv) == len(as_json) == len(as_jsonl) == 3 * ITEMS
    assert [row["judgment"] for row in as_json] == [row["judgment"] for row in judgments]

    run = study.negatives_run
    with CaptureQueriesContext(connection) as queries:
        lines = command_output("export_run", run.pk).splitlines()
    assert_constant_queries(queries, 10)
    assert len(lines) == 3 * ITEMS
    assert response_text(staff.get(f"/api/runs/{run.pk}/trec/", HTTP_ACCEPT="text/plain")).splitlines() == lines
