"""import_judgments writes in bulk (issue 14: 30K judgments took 787 s at several statements per
row): its statement count does not grow with the file, and it still takes slots as the web
does, completing an annotator's ACTIVE claim on the item instead of opening a second one."""

import math

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Assignment, ItemCandidate, Judgment
from annotation.services import claim_next_item
from tests.factories import (
    call_json_command,
    export_study,
    make_annotator,
    make_bulk_proxy_study,
    make_label_study,
    make_relic_proxy_study,
    write_jsonl,
)

pytestmark = pytest.mark.django_db


def proxy_rows(study, items: slice, annotators: list[str]) -> list[dict]:
    """Rows choosing each item's first candidate, for the items in `items` (by position)."""
    chosen = dict(
        ItemCandidate.objects.filter(item__study=study, position=0)
        .order_by("item__position")
        .values_list("item_id", "passage__external_id")
    )
    return [
        {"item": item, "annotator": name, "choice": choice}
        for item, choice in list(chosen.items())[items]
        for name in annotators
    ]


def statements_of_import(study, path) -> tuple[int, int]:
    """(statements other than INSERTs, INSERTs) that importing `path` runs."""
    with CaptureQueriesContext(connection) as queries:
        assert call_json_command("import_judgments", study.pk, path)["rejected"] == 0
    inserts = sum(query["sql"].startswith("INSERT") for query in queries.captured_queries)
    return len(queries.captured_queries) - inserts, inserts


def test_the_statements_of_an_import_do_not_grow_with_its_rows(tmp_path):
    study = make_bulk_proxy_study(110, with_judgments=False)
    small = write_jsonl(tmp_path / "small.jsonl", proxy_rows(study, slice(0, 10), ["a0", "a1", "a2"]))
    large = write_jsonl(tmp_path / "large.jsonl", proxy_rows(study, slice(10, 110), ["b0", "b1", "b2"]))

    (thirty, _), (three_hundred, inserts) = statements_of_import(study, small), statements_of_import(study, large)

    # 12 on SQLite, 13 with Postgres's row locks; one of them recounts the items' stored live
    # judgments (annotation.services.live_counts: one UPDATE per 1,000 items).
    assert thirty == three_hundred <= 13
    # An INSERT carries as many rows as the database takes (SQLite: 999 parameters, one per column
    # but the id: 39 judgments); before, every row cost at least four statements.
    per_insert = 999 // (len(Judgment._meta.concrete_fields) - 1)
    assert inserts <= 1 + 2 * math.ceil(300 / per_insert)
    assert Judgment.objects.filter(item__study=study).count() == 330
    assert Assignment.objects.filter(item__study=study, state=Assignment.State.SUBMITTED).count() == 330


def label_rows(study, items: slice, annotators: list[str], answer: dict) -> list[dict]:
    item_ids = list(study.items.order_by("position").values_list("pk", flat=True))[items]
    return [{"item": item, "annotator": name, **answer} for item in item_ids for name in annotators]


@pytest.mark.parametrize(
    "schema, candidates, answer",
    [
        ({"multi_select": True, "spans": "query"}, 3, {"selections": [0, 2], "spans": [{"start": 0, "end": 5}]}),
        ({"spans": "passage"}, 1, {"label": 1, "spans": [{"target": "passage", "start": 0, "end": 7}]}),
    ],
    ids=["multi-select with query spans", "label with passage spans"],
)
def test_a_label_studys_selections_and_spans_are_checked_without_a_statement_per_row(
    tmp_path, schema, candidates, answer
):
    """Selections are checked against the item's shown positions and spans against the shown
    text, both read with the items, not once per row."""
    study = make_label_study(items=110, candidates=candidates, label_schema=schema, judgments_per_item=3)
    small = write_jsonl(tmp_path / "small.jsonl", label_rows(study, slice(0, 10), ["a0", "a1", "a2"], answer))
    large = write_jsonl(tmp_path / "large.jsonl", label_rows(study, slice(10, 110), ["b0", "b1", "b2"], answer))

    (thirty, _), (three_hundred, _) = statements_of_import(study, small), statements_of_import(study, large)

    assert thirty == three_hundred
    stored = Judgment.objects.filter(item__study=study)
    expected_spans = [{"target": schema["spans"], **answer["spans"][0]}]
    assert stored.count() == 330 and all(judgment.spans == expected_spans for judgment in stored)


def test_an_annotators_active_claim_is_completed_and_other_claims_keep_their_slots(tmp_path):
    study = make_relic_proxy_study(1, judgments_per_item=3)
    row = export_study(study)[0]
    holder, bystander = make_annotator("holder"), make_annotator("bystander")
    held, other = claim_next_item(study, holder), claim_next_item(study, bystander)
    assert held.state == other.state == Assignment.State.ACTIVE and held.slot != other.slot

    rows = [{"item": row["item"], "annotator": name, "choice": row["gold"]} for name in ("newcomer", "holder")]
    assert call_json_command("import_judgments", study.pk, write_jsonl(tmp_path / "in.jsonl", rows)) == {
        "imported": 2,
        "rejected": 0,
    }

    held.refresh_from_db()
    assert held.state == Assignment.State.SUBMITTED and held.submitted_at is not None
    assert Judgment.objects.get(annotator=holder).assignment == held
    newcomer = Judgment.objects.get(annotator__username="newcomer").assignment
    assert newcomer.state == Assignment.State.SUBMITTED and newcomer.slot not in {held.slot, other.slot}
    assert Assignment.objects.filter(item_id=row["item"]).count() == 3
    # The bystander's claim still holds the last slot: a fourth judgment is refused.
    late = write_jsonl(tmp_path / "late.jsonl", [{"item": row["item"], "annotator": "late", "choice": row["gold"]}])
    with pytest.raises(Exception, match="already has its 3 judgments"):
        call_json_command("import_judgments", study.pk, late)
