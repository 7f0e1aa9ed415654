"""import_beir keeps the queries' metadata (for breakdowns such as LitSearch's subsets) and reads
qrels/train.tsv and qrels/dev.tsv as the splits training uses."""

import pytest
from django.core.management import CommandError

from retrieval.models import Query
from tests.factories import call_json_command, retrieval_row_counts, write_beir_folder

pytestmark = pytest.mark.django_db

CORPUS = [{"_id": f"d{i}", "title": "", "text": f"text {i}"} for i in range(4)]
QUERIES = [
    {"_id": "q1", "text": "one", "metadata": {"specificity": "broad"}, "quality": 2},
    {"_id": "q2", "text": "two", "metadata": {"specificity": "specific"}},
    {"_id": "q3", "text": "three"},
    {"_id": "q4", "text": "four"},
]


def test_query_metadata_and_train_dev_splits_are_kept(tmp_path):
    folder = write_beir_folder(tmp_path / "beir", CORPUS, QUERIES, [("q1", "d1", 1), ("q2", "d2", 1)])
    write_beir_folder(folder, CORPUS, QUERIES, [("q3", "d3", 1)], qrels_name="qrels/train.tsv")
    write_beir_folder(folder, CORPUS, QUERIES, [("q4", "d0", 1)], qrels_name="qrels/dev.tsv")
    summary = call_json_command("import_beir", folder, "--collection", "split")
    assert summary["qrels"] == 4
    rows = {q.external_id: (q.split, q.metadata) for q in Query.objects.filter(collection__name="split")}
    assert rows == {
        "q1": ("test", {"specificity": "broad", "quality": 2}),
        "q2": ("test", {"specificity": "specific"}),
        "q3": ("train", {}),
        "q4": ("dev", {}),
    }


def test_a_query_in_two_splits_is_refused_with_nothing_written(tmp_path):
    folder = write_beir_folder(tmp_path / "beir", CORPUS, QUERIES, [("q1", "d1", 1)])
    write_beir_folder(folder, CORPUS, QUERIES, [("q1", "d2", 1)], qrels_name="qrels/train.tsv")
    before = retrieval_row_counts()
    with pytest.raises(CommandError, match=r"train.tsv: field 'query-id': query 'q1' is already in the test split"):
        call_json_command("import_beir", folder, "--collection", "split")
    assert retrieval_row_counts() == before


def test_breakdown_by_a_metadata_field(tmp_path):
    folder = write_beir_folder(tmp_path / "beir", CORPUS, QUERIES, [("q1", "d1", 1), ("q2", "d2", 1)])
    call_json_command("import_beir", folder, "--collection", "split")
    run = call_json_command("retrieve", "--collection", "split", "--retriever", "bm25")
    report = call_json_command("evaluate_run", run["run_id"], "--by", "specificity", "--metrics", "R@1")
    assert {value: block["queries"] for value, block in report["by"]["specificity"].items()} == {
        "broad": 1,
        "specific": 1,
    }
