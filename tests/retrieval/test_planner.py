"""Whatever writes in bulk refreshes Postgres's planner statistics for the tables it filled
(retrieval.planner), so a study imported a moment ago is planned as what it is, not as the empty
tables autovacuum last saw. SQLite needs no statistics: nothing is run there."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import ItemCandidate, Judgment
from retrieval.models import Hit
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.factories import call_json_command, make_bulk_proxy_study, make_relic_collection, write_jsonl

pytestmark = pytest.mark.django_db


def analyzed_while(action) -> list[str]:
    """The tables ANALYZEd while `action` ran."""
    with CaptureQueriesContext(connection) as queries:
        action()
    return [query["sql"].removeprefix("ANALYZE ").strip('"') for query in queries if query["sql"].startswith("ANALYZE")]


def planner_row_estimate(model) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [model._meta.db_table])
        return cursor.fetchone()[0]


def expected(*tables: str) -> list[str]:
    return list(tables) if connection.vendor == "postgresql" else []


def test_imported_judgments_are_counted_by_the_planner_at_once(tmp_path):
    study = make_bulk_proxy_study(50, with_judgments=False)
    first_candidates = ItemCandidate.objects.filter(item__study=study, position=0).values_list(
        "item_id", "passage__external_id"
    )
    rows = [{"item": item, "annotator": name, "choice": choice} for item, choice in first_candidates for name in "abc"]
    path = write_jsonl(tmp_path / "judgments.jsonl", rows)

    tables = analyzed_while(lambda: call_json_command("import_judgments", study.pk, path))

    assert tables == expected("annotation_assignment", "annotation_judgment")
    if connection.vendor == "postgresql":
        assert planner_row_estimate(Judgment) == 150


def test_a_finished_run_has_its_hits_counted_by_the_planner():
    collection = make_relic_collection(4)

    tables = analyzed_while(lambda: execute_run(create_run(collection, get_or_create_retriever("bm25"), depth=5)))

    assert tables == expected("retrieval_hit", "retrieval_runquery")
    if connection.vendor == "postgresql":
        assert planner_row_estimate(Hit) == Hit.objects.count() == 20
