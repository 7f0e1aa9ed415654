"""create_study, export_study and import_judgments: the command contracts, an export/import
round trip, and bad input that is named precisely and writes nothing."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Assignment, Judgment, Study
from annotation.selectors import judgment_rows
from annotation.services import claim_next_item, submit_judgment
from tests.factories import (
    call_json_command,
    export_study,
    make_annotator,
    make_neighbour_run,
    make_relic_collection,
    make_relic_proxy_study,
    write_jsonl,
)

pytestmark = pytest.mark.django_db


def simulated_judgments(rows, answers):
    """Rows for import_judgments: annotator name -> function (export row -> chosen external id)."""
    return [
        {"item": row["item"], "annotator": name, "choice": pick(row)} for row in rows for name, pick in answers.items()
    ]


def test_create_study_prints_the_summary_as_json():
    collection = make_relic_collection(5)
    run = make_neighbour_run(collection)
    summary = call_json_command(
        "create_study",
        "--kind",
        "proxy",
        "--collection",
        collection.name,
        "--negatives-from",
        run.pk,
        "--items",
        4,
        "--candidates",
        3,
        "--judgments-per-item",
        3,
        "--seed",
        7,
        "--name",
        "cli study",
        "--context",
        "2/3",
    )
    study = Study.objects.get(pk=summary["study_id"])
    assert summary == {"study_id": study.pk, "items": 4, "skipped": 0, "skipped_queries": []}
    assert (study.name, study.context_left, study.context_right, study.seed) == ("cli study", 2, 3, 7)


def test_create_study_sets_the_candidate_order_keys_and_auto_advance():
    collection = make_relic_collection(3)
    run = make_neighbour_run(collection)
    page_options = ["--candidate-order", "annotator", "--keys", '{"options": "jkl", "skip": "x"}', "--auto-advance"]
    proxy_options = ["--collection", collection.name, "--negatives-from", run.pk, "--items", 3]
    summary = call_json_command("create_study", "--kind", "proxy", *proxy_options, "--name", "keyed", *page_options)

    study = Study.objects.get(pk=summary["study_id"])
    assert (study.candidate_order, study.keyboard, study.auto_advance) == (
        "annotator",
        {"options": "jkl", "skip": "x"},
        True,
    )


def test_create_study_reads_guidelines_and_filters(tmp_path):
    collection = make_relic_collection(3)
    run = make_neighbour_run(collection)
    guidelines = tmp_path / "guidelines.txt"
    guidelines.write_text("Choose the passage the critic quoted.")
    summary = call_json_command(
        "create_study",
        "--kind",
        "proxy",
        "--collection",
        collection.name,
        "--negatives-from",
        run.pk,
        "--items",
        3,
        "--seed",
        1,
        "--name",
        "guided",
        "--guidelines-file",
        guidelines,
        "--single-sentence",
        "--book",
        "book",
    )
    assert Study.objects.get(pk=summary["study_id"]).guidelines == "Choose the passage the critic quoted."


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"--collection": "no such collection"}, "--collection"),
        ({"--negatives-from": "999999"}, "--negatives-from"),
        ({"--context": "four/four"}, "--context"),
        ({"--candidates": "21"}, "candidates"),
        ({"--book": "no-such-book"}, "--book"),
        ({"--keys": '{"skip": "r"}'}, "--keys.skip"),
        ({"--keys": "{not json"}, "--keys"),
    ],
)
def test_create_study_names_the_bad_option_and_creates_nothing(change, named):
    collection = make_relic_collection(2)
    run = make_neighbour_run(collection)
    options = {
        "--kind": "proxy",
        "--collection": collection.name,
        "--negatives-from": str(run.pk),
        "--items": "2",
        "--seed": "1",
        "--name": "bad",
        **change,
    }
    with pytest.raises(CommandError) as error:
        call_command("create_study", *[part for pair in options.items() for part in pair])
    assert f"field '{named}'" in str(error.value) and "\n" not in str(error.value)
    assert not Study.objects.exists()


def test_export_study_lists_items_candidates_gold_and_sources():
    study = make_relic_proxy_study(3)
    rows = export_study(study)
    assert [row["item"] for row in rows] == list(study.items.order_by("position").values_list("pk", flat=True))
    for row in rows:
        item = study.items.get(pk=row["item"])
        assert row["query"] == item.query.external_id
        assert row["candidates"] == [c.passage.external_id for c in item.candidates.order_by("position")]
        assert row["gold"] == item.candidates.get(is_gold=True).passage.external_id
        assert row["sources"][row["gold"]] == {"run": None, "rank": None}
        negatives = [c for c in row["candidates"] if c != row["gold"]]
        assert sorted(row["sources"][c]["rank"] for c in negatives) == [2, 3]
        assert {row["sources"][c]["run"] for c in negatives} == {study.negatives_run_id}


def test_import_round_trip_from_export_study(tmp_path):
    study = make_relic_proxy_study(4)
    rows = export_study(study)
    answers = {
        "ann_a": lambda row: row["gold"],
        "ann_b": lambda row: row["candidates"][0],
        "ann_c": lambda row: next(c for c in row["candidates"] if c != row["gold"]),
    }
    path = write_jsonl(tmp_path / "judgments.jsonl", simulated_judgments(rows, answers))
    assert call_json_command("import_judgments", study.pk, path) == {"imported": 12, "rejected": 0}

    exported = list(judgment_rows(study))
    assert len(exported) == 12
    by_key = {(r["item"], r["annotator"]): r for r in exported}
    for row in rows:
        for name, pick in answers.items():
            judgment = by_key[row["item"], name]
            assert judgment["choice"] == pick(row)
            assert judgment["position"] == row["candidates"].index(pick(row))
            assert judgment["correct"] == (pick(row) == row["gold"])
            assert judgment["source"] == "import" and judgment["voided"] is False
    users = get_user_model().objects.filter(username__in=answers)
    assert users.count() == 3 and not any(user.is_active for user in users)
    # Every imported judgment holds a slot: the items are complete, the queue has nothing left.
    assert Assignment.objects.filter(item__study=study, state=Assignment.State.SUBMITTED).count() == 12
    assert claim_next_item(study, make_annotator()) is None


def test_reimporting_the_judgments_export_changes_nothing(tmp_path):
    study = make_relic_proxy_study(2, judgments_per_item=2)
    for annotator in (make_annotator("web_a"), make_annotator("web_b")):
        while (assignment := claim_next_item(study, annotator)) is not None:
            submit_judgment(annotator=annotator, item=assignment.item, position=1, seconds=8)
    exported = list(judgment_rows(study))
    path = write_jsonl(tmp_path / "export.jsonl", exported)
    assert call_json_command("import_judgments", study.pk, path) == {"imported": 0, "rejected": 4}
    assert list(judgment_rows(study)) == exported


def test_imported_seconds_are_kept(tmp_path):
    study = make_relic_proxy_study(1)
    row = export_study(study)[0]
    path = write_jsonl(
        tmp_path / "j.jsonl", [{"item": row["item"], "annotator": "timed", "choice": row["gold"], "seconds": 41.5}]
    )
    call_json_command("import_judgments", study.pk, path)
    assert Judgment.objects.get().seconds == 41.5


def bad_inputs(row, other_row):
    good = {"item": row["item"], "annotator": "ann_a", "choice": row["gold"]}
    return {
        "bad json": ([json.dumps(good), '{"item": 1, "annotator": '], 2, None),
        "unknown item": ([{**good, "item": 10**9}], 1, "item"),
        "choice not among the item's candidates": ([{**good, "choice": other_row["gold"]}], 1, "choice"),
        "duplicate (item, annotator)": ([good, {**good, "choice": row["candidates"][0]}], 2, "annotator"),
        "missing annotator": ([{"item": row["item"], "choice": row["gold"]}], 1, "annotator"),
        "negative seconds": ([{**good, "seconds": -1}], 1, "seconds"),
        "not an object": (["[1, 2, 3]"], 1, None),
        "a fourth judgment": (
            [good, {**good, "annotator": "ann_b"}, {**good, "annotator": "ann_c"}, {**good, "annotator": "ann_d"}],
            4,
            "item",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "bad json",
        "unknown item",
        "choice not among the item's candidates",
        "duplicate (item, annotator)",
        "missing annotator",
        "negative seconds",
        "not an object",
        "a fourth judgment",
    ],
)
def test_bad_import_rows_reject_the_whole_file_naming_file_line_and_field(tmp_path, case):
    study = make_relic_proxy_study(2)
    row, other_row = export_study(study)
    lines, line, field = bad_inputs(row, other_row)[case]
    # A good row first, for another item: it must not be written either.
    good_first = {"item": other_row["item"], "annotator": "early_bird", "choice": other_row["gold"]}
    path = write_jsonl(tmp_path / "bad.jsonl", [good_first, *lines])
    users_before = get_user_model().objects.count()
    with pytest.raises(CommandError) as error:
        call_command("import_judgments", str(study.pk), path, "--json")
    message = str(error.value)
    assert message.startswith(f"{path}:{line + 1}: ")
    if field:
        assert f"field '{field}'" in message
    assert not Judgment.objects.exists() and not Assignment.objects.exists()
    assert get_user_model().objects.count() == users_before


def test_a_row_contradicting_a_stored_judgment_is_an_error(tmp_path):
    study = make_relic_proxy_study(1)
    row = export_study(study)[0]
    first = write_jsonl(tmp_path / "first.jsonl", [{"item": row["item"], "annotator": "ann", "choice": row["gold"]}])
    call_json_command("import_judgments", study.pk, first)
    other = next(c for c in row["candidates"] if c != row["gold"])
    second = write_jsonl(tmp_path / "second.jsonl", [{"item": row["item"], "annotator": "ann", "choice": other}])
    with pytest.raises(CommandError, match="immutable"):
        call_command("import_judgments", str(study.pk), second)
    assert Judgment.objects.get().choice.passage.external_id == row["gold"]


def test_import_into_an_unknown_study_or_from_a_missing_file(tmp_path):
    study = make_relic_proxy_study(1)
    with pytest.raises(CommandError, match="no study"):
        call_command("import_judgments", "999999", str(tmp_path / "x.jsonl"))
    with pytest.raises(CommandError, match="file not found"):
        call_command("import_judgments", str(study.pk), str(tmp_path / "missing.jsonl"))
