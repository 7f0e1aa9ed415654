"""A collection as a bundle a peer can load: a BEIR folder that import_beir reads back with the
same qrels, the judgments behind every qrel (annotators under pseudonyms), the pool's provenance
(which run put each pair in the pool, at which rank), ir_datasets-style TREC files; the command,
the staff-only zip download, and refusals that write nothing."""

import io
import json
import zipfile

import ir_measures
import pytest
from django.core.management import CommandError, call_command

from annotation.models import Item
from retrieval.models import Collection, Qrel
from retrieval.selectors import trec_qrels_lines
from retrieval.services.external_runs import save_ranked_run
from tests.factories import (
    add_label_judgment,
    add_qrels,
    api_client,
    call_json_command,
    create_pooled_study,
    make_annotator,
    make_collection,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = pytest.mark.django_db

TEXTS = [
    "The lighthouse keeper counts the ships at dawn.",
    "Salt ledgers record every barrel of herring sold.",
    "A storm drowns the harbour lamps one by one.",
    "The keeper's daughter reads the ledger aloud.",
    "Herring boats return before the storm breaks.",
    "Dawn light on the harbour walls.",
]


@pytest.fixture
def pooled_study():
    """Three queries with graded qrels (some judged non-relevant), a BM25 run and an imported
    run, a relevance study pooled from both runs' top 2 and judged by two annotators."""
    collection = make_collection("harbour tales")
    passages = make_text_passages(collection, TEXTS)
    queries = [
        make_text_query(collection, "keeper counts ships", "q-keeper", split="test", metadata={"topic": "sea"}),
        make_text_query(collection, "herring ledger", "q-ledger", split="dev"),
        make_text_query(collection, "storm harbour", "q-storm"),
    ]
    add_qrels(queries[0], {passages[0]: 2, passages[3]: 1, passages[5]: 0})
    add_qrels(queries[1], {passages[1]: 1, passages[4]: 0})
    add_qrels(queries[2], {passages[2]: 1})
    bm25 = call_json_command("retrieve", "--collection", collection.name, "--retriever", "bm25", "--depth", "6")
    reverse = save_ranked_run(
        collection,
        name="reverse",
        retriever="reverse",
        rankings={query: [(passage, float(index)) for index, passage in enumerate(passages)] for query in queries},
    )
    study_id = create_pooled_study(
        collection, [bm25["run_id"], reverse.pk], depth=2, name="harbour pool", scale="graded-0-2"
    )
    readers = [make_annotator("mariner-anna"), make_annotator("mariner-ben")]
    for item in Item.objects.filter(study_id=study_id).prefetch_related("candidates"):
        grade = Qrel.objects.filter(query=item.query, passage=item.candidates.get().passage).first()
        for offset, reader in enumerate(readers):
            add_label_judgment(item, reader, min(2, (grade.relevance if grade else 0) + (offset and item.position % 2)))
    return collection, study_id, [bm25["run_id"], reverse.pk]


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_bundle_of_the_collections_qrels_imports_back_with_the_same_qrels(pooled_study, tmp_path):
    collection, _, _ = pooled_study
    summary = call_json_command("export_collection", collection.name, tmp_path / "bundle")
    folder = tmp_path / "bundle"

    assert summary["qrels"] == "imported" and summary["qrels_pairs"] == 6 and summary["relevant"] == 4
    assert {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/dev.tsv", "trec/qrels"} <= set(summary["files"])
    assert read_jsonl(folder / "queries.jsonl")[0] == {
        "_id": "q-keeper",
        "text": "keeper counts ships",
        "metadata": {"topic": "sea"},
    }
    again = call_json_command("import_beir", folder, "--collection", "harbour again")
    assert (again["queries"], again["passages"], again["qrels"]) == (3, 6, 6)
    copy = Collection.objects.get(name="harbour again")
    assert list(trec_qrels_lines(copy)) == list(trec_qrels_lines(collection))
    assert dict(copy.queries.values_list("external_id", "split")) == {
        "q-keeper": "test",
        "q-ledger": "dev",
        "q-storm": "test",
    }

    trec_qrels = list(ir_measures.read_trec_qrels(str(folder / "trec" / "qrels")))
    assert {(q.query_id, q.doc_id, q.relevance) for q in trec_qrels} == {
        tuple(line.split()[i] if i != 3 else int(line.split()[3]) for i in (0, 2, 3))
        for line in trec_qrels_lines(collection)
    }
    docs = (folder / "trec" / "docs.tsv").read_text().splitlines()
    assert len(docs) == 6 and all(line.count("\t") == 1 for line in docs)
    assert [row["score"] for row in read_jsonl(folder / "judgments.jsonl")] == [2, 1, 0, 1, 0, 1]


def test_a_study_bundle_carries_the_labels_behind_each_qrel_and_where_each_pair_came_from(pooled_study, tmp_path):
    collection, study_id, run_ids = pooled_study
    summary = call_json_command("export_collection", collection.name, tmp_path / "b", "--qrels", f"study:{study_id}")
    folder = tmp_path / "b"
    exported = {(row["query"], row["candidates"][0]): row for row in export_study_rows(study_id)}

    judgments = read_jsonl(folder / "judgments.jsonl")
    assert summary["qrels"] == f"study:{study_id}" and len(judgments) == len(exported) == summary["qrels_pairs"]
    for row in judgments:
        assert {label["annotator"] for label in row["labels"]} == {"annotator-1", "annotator-2"}
        assert row["adjudicated"] is None and row["source"] == f"study:{study_id}"
    provenance = read_jsonl(folder / "provenance.jsonl")
    for row in provenance:
        assert row["sources"] == exported[row["query-id"], row["corpus-id"]]["all_sources"]
        assert {source["run"] for source in row["sources"]} <= set(run_ids) and all(
            s["rank"] <= 2 for s in row["sources"]
        )
    runs = json.loads((folder / "runs.json").read_text())
    assert set(runs) == {str(run_id) for run_id in run_ids} and runs[str(run_ids[1])]["name"] == "reverse"
    described = json.loads((folder / "bundle.json").read_text())
    assert described["pool"]["study"] == study_id and described["pool"]["parameters"]["depth"] == 2
    assert "sources" not in described["pool"]["parameters"]
    strategy = described["pool"]["strategy"]  # the study's Pool: strategy, depth and each run's share
    assert strategy["strategy"] == "depth" and strategy["depth"] == 2
    assert {entry["run"] for entry in strategy["runs"]} == set(run_ids)
    everything = "".join(path.read_text() for path in folder.rglob("*") if path.is_file())
    assert "mariner" not in everything  # annotators go by pseudonyms


def export_study_rows(study_id: int) -> list[dict]:
    out = io.StringIO()
    call_command("export_study", study_id, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_refusals_name_the_problem_and_write_nothing(pooled_study, tmp_path):
    collection, _, _ = pooled_study
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    with pytest.raises(CommandError, match="field 'out': must be a new or empty folder"):
        call_json_command("export_collection", collection.name, occupied)
    assert [path.name for path in occupied.iterdir()] == ["notes.txt"]
    with pytest.raises(CommandError, match="field 'qrels': unknown qrels source 'nobody'"):
        call_json_command("export_collection", collection.name, tmp_path / "new", "--qrels", "nobody")
    with pytest.raises(CommandError, match="field 'qrels': no study with id 999999"):
        call_json_command("export_collection", collection.name, tmp_path / "new", "--qrels", "study:999999")
    assert not (tmp_path / "new").exists() and [p.name for p in tmp_path.iterdir()] == ["occupied"]


def test_staff_download_the_bundle_as_a_zip_and_nobody_else_does(pooled_study):
    collection, study_id, _ = pooled_study
    url = f"/api/collections/{collection.pk}/bundle/?qrels=study:{study_id}"
    response = api_client(make_user(staff=True)).get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert f'filename="harbour-tales-study{study_id}.zip"' in response["Content-Disposition"]
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as archive:
        names = archive.namelist()
        assert "harbour-tales/provenance.jsonl" in names and "harbour-tales/qrels/test.tsv" in names
    assert api_client(make_user(staff=True)).get(f"/api/collections/{collection.pk}/bundle/?qrels=x").status_code == 400
    for user in (None, make_annotator(), make_user()):
        refused = api_client(user).get(url)
        assert refused.status_code in (401, 403) and b"sources" not in refused.content
