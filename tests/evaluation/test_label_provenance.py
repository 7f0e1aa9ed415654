"""Every export says where each label comes from: adjudicated (an adjudicator's decision),
unanimous, single, aggregated (and by which method), sent back for rework (waiting for a new
round) or unjudged. One relevance study (graded 0-2, three annotators) holds every case:

    item   labels    what happened                      label   source
    A      0 2 2     decided 1 ("Guideline gap")        1       adjudicated
    B      1 1 1                                        1       unanimous
    C      0 1 2     majority tie -> the lowest         0       aggregated (majority)
    D      2 2 0     sent back ("Ambiguous item")       -       sent_back
    E      2         one judgment                       2       single
    F      -                                            -       unjudged
"""

import io
import json

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from annotation.exports import judgment_export
from annotation.models import Adjudication, Item, Judgment
from annotation.services.adjudication import decide, send_back
from evaluation.label_aggregation import label_sources_section, study_aggregation
from evaluation.qrels import relevance_qrels
from evaluation.services import study_report
from tests.factories import (
    add_judgment,
    add_label_item,
    add_label_judgment,
    call_json_command,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
    make_text_passages,
    make_text_query,
    make_user,
    response_text,
)

pytestmark = pytest.mark.django_db

LABELS = {"A": [0, 2, 2], "B": [1, 1, 1], "C": [0, 1, 2], "D": [2, 2, 0], "E": [2], "F": []}
EXPECTED = {
    "A": (1, "adjudicated", None),
    "B": (1, "unanimous", None),
    "C": (0, "aggregated", "majority"),
    "D": (None, "sent_back", None),
    "E": (2, "single", None),
    "F": (None, "unjudged", None),
}


@pytest.fixture
def study():
    study = make_label_study(label_schema={"scale": "graded-0-2"})
    passages = make_text_passages(study.collection, [f"passage about {name}" for name in LABELS])
    people = [make_annotator(f"reader-{n}") for n in range(3)]
    items = {}
    for (name, labels), passage in zip(LABELS.items(), passages):
        query = make_text_query(study.collection, f"query {name}", external_id=f"q{name}")
        items[name] = add_label_item(study, query=query, passages=[passage])
        for person, label in zip(people, labels):
            add_label_judgment(items[name], person, label)
    gold = add_label_item(study, role=Item.Role.GOLD, expected_label=0)
    add_label_judgment(gold, people[0], 0)
    staff = make_user(staff=True)
    decide(items["A"], by=staff, label=1, reason="Guideline gap")
    send_back(items["D"], by=staff, reason="Ambiguous item")
    study.items_by_name = items
    study.gold = gold
    return study


def by_item(study) -> dict[int, str]:
    return {item.pk: name for name, item in study.items_by_name.items()}


def test_the_judgment_exports_mark_each_row_with_its_items_label_and_source(study):
    names = by_item(study)
    rows = [json.loads(line) for chunk in judgment_export(study, "jsonl") for line in chunk.splitlines()]
    seen = {}
    for row in rows:
        if row["item"] == study.gold.pk:
            assert (row["item_label"], row["label_source"], row["label_method"], row["reworks"]) == (None,) * 4
            continue
        seen[names[row["item"]]] = (row["item_label"], row["label_source"], row["label_method"], row["reworks"])
    expected = {name: (*EXPECTED[name], int(name == "D")) for name in "ABCDE"}  # F has no judgment, no row
    assert seen == expected
    voided = [row for row in rows if names.get(row["item"]) == "D"]
    assert len(voided) == 3 and all(row["voided"] for row in voided)
    csv_text = "".join(judgment_export(study, "csv"))
    header = csv_text.splitlines()[0].split(",")
    assert header[-4:] == ["item_label", "label_source", "label_method", "reworks"]
    as_json = json.loads("".join(judgment_export(study, "json")))
    assert [(row["item"], row["label_source"]) for row in as_json] == [
        (row["item"], row["label_source"]) for row in rows
    ]


def test_the_rest_judgment_export_carries_the_same_columns(study, client):
    client.force_login(make_user(staff=True))
    body = response_text(client.get(f"/api/judgments/?study={study.pk}&format=jsonl"))
    sources = {json.loads(line)["item"]: json.loads(line)["label_source"] for line in body.splitlines()}
    assert sources[study.items_by_name["A"].pk] == "adjudicated"
    assert sources[study.items_by_name["D"].pk] == "sent_back"


def test_qrels_say_where_each_label_comes_from_and_count_the_pairs_sent_back(study):
    export = relevance_qrels(study)
    rows = {row["query-id"]: row for row in export.provenance_rows()}
    assert set(rows) == {"qA", "qB", "qC", "qE"}  # D waits for its new round, F was never judged
    for name in "ABCE":
        row = rows[f"q{name}"]
        assert (row["score"], row["label_source"], row["label_method"]) == EXPECTED[name]
    summary = export.summary()
    assert summary["label_sources"] == {"adjudicated": 1, "unanimous": 1, "single": 1, "aggregated": 1}
    assert (summary["unjudged"], summary["sent_back"]) == (2, 1)
    mean = {row["query-id"]: row for row in relevance_qrels(study, "mean").provenance_rows()}
    assert (mean["qC"]["score"], mean["qC"]["label_method"]) == (1, "mean")


def test_export_qrels_writes_the_provenance_as_json_lines_on_stdout_in_a_file_and_over_rest(study, tmp_path, client):
    out = io.StringIO()
    call_command("export_qrels", str(study.pk), "--provenance", stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["label_source"] for line in lines] == ["adjudicated", "unanimous", "aggregated", "single"]
    target = tmp_path / "provenance.jsonl"
    summary = call_json_command("export_qrels", study.pk, "--provenance", "--out", target)
    assert [json.loads(line) for line in target.read_text().splitlines()] == lines
    assert summary["label_sources"]["adjudicated"] == 1 and summary["sent_back"] == 1
    plain = io.StringIO()
    call_command("export_qrels", str(study.pk), stdout=plain)
    assert plain.getvalue().splitlines() == ["qA 0 d0 1", "qB 0 d1 1", "qC 0 d2 0", "qE 0 d4 2"]  # TREC, unchanged
    client.force_login(make_user(staff=True))
    body = response_text(client.get(f"/api/studies/{study.pk}/qrels/?provenance=1"))
    assert [json.loads(line) for line in body.splitlines()] == lines


def test_a_competence_model_names_itself_as_the_method_of_what_it_aggregated(study):
    export = relevance_qrels(study, "dawid-skene")
    for row in export.provenance_rows():
        assert row["label_method"] == ("dawid-skene" if row["label_source"] == "aggregated" else None)
    assert {row["query-id"]: row["label_source"] for row in export.provenance_rows()}["qA"] == "adjudicated"


def test_aggregate_labels_applies_decisions_beside_the_models_labels(study):
    names = by_item(study)
    payload = study_aggregation(study, "majority")
    sources = {names[item]: source for item, source in payload["label_sources"].items()}
    assert sources == {name: EXPECTED[name][1] for name in "ABCE"}
    assert payload["adjudicated"] == {study.items_by_name["A"].pk: 1}
    assert payload["labels"][study.items_by_name["A"].pk] == 2  # the majority's own answer stays
    assert payload["final_labels"][study.items_by_name["A"].pk] == 1
    assert payload["sent_back"] == [study.items_by_name["D"].pk]
    out = io.StringIO()
    call_command("aggregate_labels", str(study.pk), "--method", "mace", "--soft", stdout=out)
    soft = {names[row["item"]]: row for row in map(json.loads, out.getvalue().splitlines())}
    assert soft["A"]["label_source"] == "adjudicated" and soft["A"]["adjudicated"] == 1
    assert soft["B"]["label_source"] == "unanimous" and soft["B"]["adjudicated"] is None


def test_the_report_counts_the_sources_and_marks_each_aggregated_unit(study):
    report = study_report(study)
    assert report["label_sources"] == {
        "method": "majority",
        "items": {"adjudicated": 1, "unanimous": 1, "single": 1, "aggregated": 1, "sent_back": 1, "unjudged": 1},
    }
    names = by_item(study)
    units = {names[entry["item"]]: entry for entry in report["aggregates"] if entry["item"] in names}
    assert {name: (entry["label_source"], entry["label_method"]) for name, entry in units.items()} == {
        name: EXPECTED[name][1:] for name in LABELS
    }


def test_the_dataset_export_carries_each_items_label_and_source(study, tmp_path):
    call_json_command("export_dataset", study.pk, tmp_path / "out")
    rows = {row["item"]: row for row in pq.read_table(tmp_path / "out" / "items.parquet").to_pylist()}
    for name, item in study.items_by_name.items():
        label, source, method = EXPECTED[name]
        row = rows[item.pk]
        assert (row["label"], row["label_source"], row["label_method"]) == (
            None if label is None else json.dumps(label),
            source,
            method,
        )
        assert row["reworks"] == int(name == "D")
    assert rows[study.gold.pk]["label_source"] is None


def test_a_collection_bundle_marks_each_study_qrel(study, tmp_path):
    call_json_command("export_collection", study.collection.name, tmp_path / "bundle", "--qrels", f"study:{study.pk}")
    records = [json.loads(line) for line in (tmp_path / "bundle" / "judgments.jsonl").read_text().splitlines()]
    sources = {record["query-id"]: (record["label_source"], record["label_method"]) for record in records}
    assert sources == {f"q{name}": EXPECTED[name][1:] for name in "ABCE"}


def test_proxy_studies_mark_their_labels_too():
    study = make_relic_proxy_study(4)
    people = [make_annotator() for _ in range(3)]
    items = list(study.items.order_by("position"))
    for item, positions in zip(items, [(0, 0, 0), (0, 1, 1), (2, 1, 0), (1, 1, 2)]):
        for person, position in zip(people, positions):
            add_judgment(item, person, position=position)
    staff = make_user(staff=True)
    decide(items[2], by=staff, position=2, reason="Annotator error")
    send_back(items[3], by=staff, reason="Broken item")
    report = study_report(study)
    assert report["label_sources"]["items"] == {
        "adjudicated": 1,
        "unanimous": 1,
        "single": 0,
        "aggregated": 1,
        "sent_back": 1,
        "unjudged": 0,
    }
    payload = study_aggregation(study, "dawid-skene")
    assert payload["label_sources"][items[0].pk] == "unanimous" and payload["final_labels"][items[2].pk] == 2
    rows = [json.loads(line) for chunk in judgment_export(study, "jsonl") for line in chunk.splitlines()]
    assert {(row["item"], row["item_label"], row["label_source"]) for row in rows} == {
        (items[0].pk, 0, "unanimous"),
        (items[1].pk, 1, "aggregated"),
        (items[2].pk, 2, "adjudicated"),
        (items[3].pk, None, "sent_back"),
    }


def every_export(study) -> dict:
    """What each export says about the study's labels, keyed so that a duplicate shows: the TREC
    lines and provenance rows (as lists), the judgment rows by judgment id, the report's count."""
    out = io.StringIO()
    call_command("export_qrels", str(study.pk), stdout=out)
    return {
        "trec": out.getvalue().splitlines(),
        "provenance": {
            method: list(relevance_qrels(study, method).provenance_rows())
            for method in ("majority", "mean", "dawid-skene")
        },
        "judgments": [json.loads(line) for chunk in judgment_export(study, "jsonl") for line in chunk.splitlines()],
        "report": label_sources_section(study)["items"],  # the report's section, without the rest
    }


def assert_each_pair_once(study, exported: dict, pairs: int, adjudicated: dict[str, int]) -> None:
    """One TREC line and one provenance row per judged pair whatever the method, each judgment
    exported once, and the adjudicated pairs (query id -> label) exactly these (the report counts
    items: the two items of one pair, both decided, count twice there)."""
    assert len(exported["trec"]) == len({tuple(line.split()[::2]) for line in exported["trec"]}) == pairs
    for method, rows in exported["provenance"].items():
        keys = [(row["query-id"], row["corpus-id"]) for row in rows]
        assert len(keys) == len(set(keys)) == pairs, method
        decided = {row["query-id"]: row["score"] for row in rows if row["label_source"] == "adjudicated"}
        assert decided == adjudicated, method
    ids = [row["judgment"] for row in exported["judgments"]]
    assert len(ids) == len(set(ids)) == Judgment.objects.filter(item__study=study).count()
    assert exported["report"]["adjudicated"] == Adjudication.objects.filter(item__study=study).count()


def test_a_decision_reaches_every_export_exactly_once_through_revision_rework_and_a_new_round(study):
    """Item A is decided (fixture), revised, sent back, judged again by new annotators and
    decided again; item B's pair is also shown in a second item, which is decided. At each step
    every export has each pair once, the latest decision is the label, and no judgment is lost or
    repeated."""
    staff = make_user(staff=True)
    item_a, item_b = study.items_by_name["A"], study.items_by_name["B"]
    judged_pairs = 4  # A B C E (D waits for its round, F was never judged)

    assert_each_pair_once(study, every_export(study), judged_pairs, {"qA": 1})

    decide(item_a, by=staff, label=2, reason="Annotator error")  # the latest decision stands
    assert Adjudication.objects.filter(item=item_a).count() == 1
    now = every_export(study)
    assert_each_pair_once(study, now, judged_pairs, {"qA": 2})
    assert "qA 0 d0 2" in now["trec"]

    send_back(item_a, by=staff, reason="Ambiguous item")
    now = every_export(study)
    assert_each_pair_once(study, now, judged_pairs - 1, {})
    assert not Adjudication.objects.filter(item=item_a).exists()
    assert {row["label_source"] for row in now["judgments"] if row["item"] == item_a.pk} == {"sent_back"}

    newcomers = [make_annotator(f"second-round-{n}") for n in range(2)]
    for person, label in zip(newcomers, (0, 2)):
        add_label_judgment(item_a, person, label)
    now = every_export(study)
    assert_each_pair_once(study, now, judged_pairs, {})
    rows_a = [row for row in now["judgments"] if row["item"] == item_a.pk]
    assert len(rows_a) == 5 and sum(not row["voided"] for row in rows_a) == 2  # 3 voided kept, 2 new
    assert {row["label_source"] for row in rows_a} == {"aggregated"} and {row["reworks"] for row in rows_a} == {1}

    decide(item_a, by=staff, label=0, reason="Guideline gap")
    twin = add_label_item(study, query=item_b.query, passages=[item_b.candidates.get().passage])
    for person, label in zip(newcomers, (0, 1)):
        add_label_judgment(twin, person, label)
    decide(twin, by=staff, label=0, reason="Broken item")
    now = every_export(study)
    assert_each_pair_once(study, now, judged_pairs, {"qA": 0, "qB": 0})  # B's pair once, as decided
    assert [line for line in now["trec"] if line.startswith("qB ")] == ["qB 0 d1 0"]
    assert Adjudication.objects.filter(item__study=study).count() == 2
