"""Relevance and quotability studies through the CLI and REST: create_study for each kind,
export_study rows, import_judgments of labels (validated like web answers, all or nothing),
the judgments export round trip, POST /api/studies/ per kind and the annotator submit endpoint."""

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Item, Judgment, Study
from annotation.selectors import judgment_rows
from annotation.services import create_quotability_study, create_relevance_study
from tests.factories import (
    add_pool,
    api_client,
    call_json_command,
    export_study,
    make_annotator,
    make_label_collection,
    make_neighbour_run,
    make_quote_collection,
    make_relic_collection,
    make_scored_run,
    make_user,
    response_text,
    write_jsonl,
)

pytestmark = pytest.mark.django_db

RUBRIC = [{"name": "specificity", "values": [0, 1]}, {"name": "quality", "values": [0, 1, 2]}]
SCHEMA = {"scale": "graded-0-2", "spans": "passage", "rubric": RUBRIC, "rationale": "optional"}


def runs_for(collection):
    return (
        make_scored_run(collection, {"q0": {"d0": 3, "d1": 2}, "q1": {"d1": 3, "d2": 2}}),
        make_scored_run(collection, {"q0": {"d1": 3, "d3": 2}, "q1": {"d4": 3, "d1": 2}}),
    )


def write_json(path, data):
    path.write_text(json.dumps(data, indent=1))
    return path


# --- create_study -------------------------------------------------------------------------------


def test_create_study_builds_a_relevance_study_from_pooled_runs_and_schema_options(tmp_path):
    collection = make_label_collection(2)
    run_a, run_b = runs_for(collection)
    rubric = write_json(tmp_path / "rubric.json", RUBRIC)
    summary = call_json_command(
        "create_study",
        "--kind",
        "relevance",
        "--collection",
        collection.name,
        "--name",
        "cli relevance",
        "--runs",
        f"{run_a.pk},{run_b.pk}",
        "--depth",
        2,
        "--scale",
        "graded-0-2",
        "--spans",
        "passage",
        "--rubric",
        rubric,
        "--rationale",
        "optional",
        "--judgments-per-item",
        4,
        "--seed",
        3,
    )
    study = Study.objects.get(pk=summary["study_id"])
    assert summary == {"study_id": study.pk, "items": 6, "skipped": 0, "skipped_queries": []}
    assert (study.kind, study.judgments_per_item, study.seed) == ("relevance", 4, 3)
    assert study.label_schema["values"] == [0, 1, 2] and study.label_schema["rubric"][1]["name"] == "quality"
    assert study.parameters["runs"] == [run_a.pk, run_b.pk]


def test_create_study_reads_a_schema_file_and_uses_pools(tmp_path):
    collection = make_label_collection(2)
    add_pool(collection.queries.get(external_id="q0"), list(collection.passages.order_by("ordinal")[:3]))
    schema = write_json(tmp_path / "schema.json", {"scale": "0-10", "rationale": "required"})
    summary = call_json_command(
        "create_study",
        "--kind",
        "relevance",
        "--collection",
        collection.name,
        "--name",
        "pooled",
        "--use-pools",
        "--schema",
        schema,
    )
    study = Study.objects.get(pk=summary["study_id"])
    assert summary["items"] == 3 and summary["skipped"] == 1
    assert study.label_schema["scale"] == "0-10" and study.label_schema["rationale"] == "required"


def test_create_study_builds_quotability_studies_and_the_pilot():
    collection = make_quote_collection(3)
    run = make_scored_run(collection, {"c0": {"s1:p1": 2}, "c1": {"s1:p0": 2}, "c2": {"s0:p2": 1}})
    summary = call_json_command(
        "create_study",
        "--kind",
        "quotability",
        "--collection",
        collection.name,
        "--name",
        "crowd",
        "--runs",
        run.pk,
    )
    study = Study.objects.get(pk=summary["study_id"])
    assert summary["items"] == 2 and summary["skipped_queries"][0]["query"] == "c1"
    assert (study.judgments_per_item, study.context_left, study.context_right) == (5, 4, 0)
    summary = call_json_command(
        "create_study",
        "--kind",
        "quotability",
        "--collection",
        collection.name,
        "--name",
        "pilot",
        "--multi-select",
        "--n-queries",
        2,
        "--judgments-per-item",
        3,
    )
    pilot = Study.objects.get(pk=summary["study_id"])
    assert summary["items"] == 2 and pilot.label_schema["multi_select"] is True
    assert {item.candidates.count() for item in pilot.items.all()} == {4}


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--kind", "relevance"], "field 'runs'"),
        (["--kind", "relevance", "--runs", "999"], "field '--runs'"),
        (["--kind", "relevance", "--use-pools", "--scale", "1-5"], "invalid choice"),
        (["--kind", "relevance", "--use-pools", "--spans-required"], "field 'label_schema.spans_required'"),
        (["--kind", "relevance", "--use-pools", "--queries", "q0,q9"], "field 'queries'"),
        (["--kind", "quotability"], "field 'run'"),
        (["--kind", "proxy"], "field '--negatives-from'"),
    ],
)
def test_create_study_names_the_bad_option_and_creates_nothing(arguments, named):
    collection = make_label_collection(2)
    with pytest.raises(CommandError) as error:
        call_command("create_study", "--collection", collection.name, "--name", "bad", *arguments)
    assert named in str(error.value)
    assert not Study.objects.exists()


def test_a_bad_schema_file_is_named_with_its_field(tmp_path):
    collection = make_label_collection(2)
    schema = write_json(tmp_path / "schema.json", {"scale": "binary", "values": [0, 2]})
    with pytest.raises(CommandError) as error:
        call_command(
            "create_study",
            "--kind",
            "relevance",
            "--collection",
            collection.name,
            "--name",
            "bad",
            "--use-pools",
            "--schema",
            str(schema),
        )
    assert str(schema) in str(error.value) and "field 'label_schema.values'" in str(error.value)
    broken = tmp_path / "broken.json"
    broken.write_text('{"scale":\n  binary}')
    with pytest.raises(CommandError, match=r"broken.json:2: not valid JSON"):
        call_command(
            "create_study",
            "--kind",
            "relevance",
            "--collection",
            collection.name,
            "--name",
            "bad",
            "--use-pools",
            "--schema",
            str(broken),
        )
    with pytest.raises(CommandError, match="not both"):
        call_command(
            "create_study",
            "--kind",
            "relevance",
            "--collection",
            collection.name,
            "--name",
            "bad",
            "--use-pools",
            "--schema",
            str(schema),
            "--scale",
            "binary",
        )


# --- export and import ------------------------------------------------------------------------


def relevance_study(**settings):
    collection = make_label_collection(2)
    options = {
        "name": "exchange",
        "collection": collection,
        "runs": runs_for(collection),
        "depth": 2,
        "label_schema": SCHEMA,
        **settings,
    }
    return create_relevance_study(**options).study


def test_export_study_adds_role_expected_answer_and_every_source():
    study = relevance_study()
    gold = study.items.order_by("position").first()
    Item.objects.filter(pk=gold.pk).update(role=Item.Role.GOLD, expected_label=2)
    rows = export_study(study)
    assert len(rows) == 6  # q0: d0 d1 d3; q1: d1 d2 d4
    first = rows[0]
    assert set(first) == {"item", "query", "candidates", "gold", "sources", "role", "expected", "all_sources"}
    assert (first["role"], first["expected"], first["gold"]) == ("gold", 2, None)
    assert all(row["role"] == "work" and row["expected"] is None for row in rows[1:])
    d1_q0 = next(row for row in rows if row["query"] == "q0" and row["candidates"] == ["d1"])
    run_ids = study.parameters["runs"]
    assert d1_q0["all_sources"] == [{"run": run_ids[0], "rank": 2}, {"run": run_ids[1], "rank": 1}]
    assert d1_q0["sources"] == {"d1": {"run": run_ids[1], "rank": 1}}


def label_rows(study):
    """Two annotators' answers to every item: ann1 says 2 with a span and a rationale, ann2 says 0."""
    rows = []
    for item in study.items.order_by("position"):
        rows.append(
            {
                "item": item.pk,
                "annotator": "ann1",
                "label": 2,
                "spans": [{"start": 0, "end": 7}],
                "rubric": {"specificity": 1, "quality": 2},
                "rationale": "clearly the same plot",
                "seconds": 9,
            }
        )
        rows.append({"item": item.pk, "annotator": "ann2", "label": 0, "rubric": {"specificity": 0, "quality": 0}})
    return rows


def test_labels_import_and_come_back_in_the_judgments_export(tmp_path):
    study = relevance_study()
    rows = label_rows(study)
    assert call_json_command("import_judgments", study.pk, write_jsonl(tmp_path / "in.jsonl", rows)) == {
        "imported": len(rows),
        "rejected": 0,
    }
    exported = list(judgment_rows(study))
    first = next(row for row in exported if row["annotator"] == "ann1")
    assert (first["label"], first["rubric"], first["rationale"]) == (
        2,
        {"specificity": 1, "quality": 2},
        "clearly the same plot",
    )
    assert first["spans"] == [{"target": "passage", "start": 0, "end": 7}]
    assert (first["choice"], first["selections"], first["correct"], first["role"]) == (None, [], None, "work")
    again = write_jsonl(tmp_path / "export.jsonl", exported)
    assert call_json_command("import_judgments", study.pk, again) == {"imported": 0, "rejected": len(rows)}


def test_a_row_contradicting_a_stored_label_is_an_error(tmp_path):
    study = relevance_study()
    rows = label_rows(study)
    call_json_command("import_judgments", study.pk, write_jsonl(tmp_path / "in.jsonl", rows))
    changed = [{**rows[0], "rationale": "on second thought"}]
    with pytest.raises(CommandError, match="immutable"):
        call_command("import_judgments", str(study.pk), str(write_jsonl(tmp_path / "changed.jsonl", changed)))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"label": 3}, "label"),
        ({"label": None}, "label"),
        ({"spans": [{"start": 7, "end": 2}]}, "spans[0]"),
        ({"rubric": {"specificity": 1}}, "rubric.quality"),
        ({"rubric": {"specificity": 1, "quality": 0, "depth": 1}}, "rubric.depth"),
        ({"selections": [0]}, "selections"),
        ({"rationale": 5}, "rationale"),
    ],
)
def test_a_bad_label_row_rejects_the_file_naming_file_line_and_field(tmp_path, change, field):
    study = relevance_study()
    rows = label_rows(study)
    rows[3] = {**rows[3], **change}
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(CommandError) as error:
        call_command("import_judgments", str(study.pk), str(path))
    assert f"{path}:4: field '{field}'" in str(error.value)
    assert not Judgment.objects.exists()


def test_a_required_rationale_is_required_in_imports_too(tmp_path):
    study = relevance_study(label_schema={"rationale": "required"})
    item = study.items.first()
    path = write_jsonl(tmp_path / "in.jsonl", [{"item": item.pk, "annotator": "ann1", "label": 1}])
    with pytest.raises(CommandError, match="field 'rationale'"):
        call_command("import_judgments", str(study.pk), str(path))


def test_pilot_selections_import_and_export(tmp_path):
    collection = make_quote_collection(2)
    study = create_quotability_study(name="pilot", collection=collection, label_schema={"multi_select": True}).study
    item = study.items.first()
    path = write_jsonl(tmp_path / "in.jsonl", [{"item": item.pk, "annotator": "ann1", "selections": [2, 0]}])
    assert call_json_command("import_judgments", study.pk, path) == {"imported": 1, "rejected": 0}
    (row,) = judgment_rows(study)
    assert (row["label"], row["selections"]) == (None, [0, 2])
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"item": item.pk, "annotator": "ann2", "selections": [4]}])
    with pytest.raises(CommandError, match=r"bad.jsonl:1: field 'selections'"):
        call_command("import_judgments", str(study.pk), str(bad))


# --- REST --------------------------------------------------------------------------------------


def staff_client():
    return api_client(make_user(staff=True))


def test_the_api_creates_a_relevance_study_with_its_schema():
    collection = make_label_collection(2)
    run_a, run_b = runs_for(collection)
    response = staff_client().post(
        "/api/studies/",
        {
            "kind": "relevance",
            "name": "api relevance",
            "collection": collection.name,
            "runs": [run_a.pk, run_b.pk],
            "depth": 2,
            "label_schema": SCHEMA,
            "judgments_per_item": 2,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["items"] == 6 and body["study"]["kind"] == "relevance"
    assert body["study"]["label_schema"]["rubric"][0]["name"] == "specificity"
    assert Study.objects.get(pk=body["study_id"]).judgments_per_item == 2


def test_the_api_creates_quotability_studies_with_the_kinds_defaults():
    collection = make_quote_collection(3)
    run = make_scored_run(collection, {"c0": {"s1:p1": 2}, "c1": {"s0:p0": 2}})
    client = staff_client()
    response = client.post(
        "/api/studies/",
        {"kind": "quotability", "name": "api crowd", "collection": collection.name, "run": run.pk},
        format="json",
    )
    assert response.status_code == 201, response.json()
    study = Study.objects.get(pk=response.json()["study_id"])
    assert (study.judgments_per_item, study.context_right, study.items.count()) == (5, 0, 2)
    response = client.post(
        "/api/studies/",
        {
            "kind": "quotability",
            "name": "api pilot",
            "collection": collection.name,
            "label_schema": {"multi_select": True},
            "candidates_from": "document",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()


def test_the_api_still_creates_proxy_studies():
    collection = make_relic_collection(3)
    run = make_neighbour_run(collection)
    response = staff_client().post(
        "/api/studies/",
        {"name": "api proxy", "collection": collection.name, "negatives_run": run.pk, "items": 3},
        format="json",
    )
    assert response.status_code == 201 and response.json()["items"] == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "relevance", "use_pools": True, "label_schema": {"scale": "1-5"}}, "label_schema.scale"),
        ({"kind": "relevance", "items": 3}, "items"),  # another kind's setting
        ({"kind": "relevance"}, "runs"),
        ({"kind": "proxy"}, "negatives_run"),
        ({"kind": "quotability", "selection": "best"}, "selection"),
    ],
)
def test_the_api_names_the_bad_field(body, field):
    collection = make_label_collection(2)
    response = staff_client().post(
        "/api/studies/", {"name": "bad", "collection": collection.name, **body}, format="json"
    )
    assert response.status_code == 400
    assert field in response.json()
    assert not Study.objects.exists()


def test_annotators_submit_labels_spans_rubric_and_rationale_over_rest():
    study = relevance_study()
    client = api_client(make_annotator())
    payload = client.get(f"/api/annotate/{study.pk}/next/").json()
    assert payload["spans"]["target"] == "passage"
    answer = {
        "item": payload["item"],
        "label": 1,
        "spans": [{"target": "passage", "start": 0, "end": 4}],
        "rubric": {"specificity": 0, "quality": 1},
        "rationale": "partly",
        "seconds": 12,
    }
    bad = client.post(f"/api/annotate/{study.pk}/submit/", {**answer, "rubric": {"specificity": 0}}, format="json")
    assert bad.status_code == 400 and "rubric.quality" in bad.json()["detail"]
    response = client.post(f"/api/annotate/{study.pk}/submit/", answer, format="json")
    assert response.status_code == 201
    body = response.json()
    assert (body["label"], body["rubric"], body["rationale"]) == (1, {"specificity": 0, "quality": 1}, "partly")
    assert body["spans"] == [{"target": "passage", "start": 0, "end": 4}] and body["selections"] == []


def test_the_csv_export_writes_label_parts_as_json():
    study = relevance_study()
    annotator = make_annotator()
    client = api_client(annotator)
    payload = client.get(f"/api/annotate/{study.pk}/next/").json()
    client.post(
        f"/api/annotate/{study.pk}/submit/",
        {
            "item": payload["item"],
            "label": 2,
            "spans": [{"start": 1, "end": 3}],
            "rubric": {"specificity": 1, "quality": 2},
        },
        format="json",
    )
    response = staff_client().get(f"/api/judgments/?study={study.pk}&format=csv")
    (row,) = list(csv.DictReader(io.StringIO(response_text(response))))
    assert json.loads(row["spans"]) == [{"target": "passage", "start": 1, "end": 3}]
    assert json.loads(row["rubric"]) == {"specificity": 1, "quality": 2}
    assert (row["label"], row["selections"], row["role"]) == ("2", "[]", "work")
