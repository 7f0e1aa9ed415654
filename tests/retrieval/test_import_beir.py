"""import_beir: a BEIR-style folder becomes passages, queries, qrels and per-query pools."""

import json

import pytest
from django.core.management import CommandError, call_command

from retrieval.models import Collection, Passage, PoolEntry, Qrel, Query
from retrieval.services.importers import import_beir
from tests.factories import call_json_command, make_collection, retrieval_row_counts, write_beir_folder

CORPUS = [
    {"_id": "d1", "title": "Lamps", "text": "Lamps give light."},
    {"_id": "d2", "text": "Rivers flood in spring."},
    {"_id": "d3", "title": "", "text": "Bridges carry roads."},
    {"_id": "d4", "title": None, "text": "Towns sleep at night."},
]
QUERIES = [{"_id": "q1", "text": "what gives light"}, {"_id": "q2", "text": "what carries roads"}]
QRELS = [("q1", "d1", 1), ("q1", "d2", 0), ("q2", "d3", 2), ("q2", "d3", 2)]  # an exact repeat is merged
POOLS = {"q1": ["d2", "d1", "d4"], "q2": ["d3", "d4"]}


def write_valid_folder(directory, **changes):
    """The small valid folder above, with `changes` (corpus=, queries=, qrels=, pools=, qrels_name=)."""
    parts = {"corpus": CORPUS, "queries": QUERIES, "qrels": QRELS, "pools": POOLS, **changes}
    return write_beir_folder(directory, **parts)


@pytest.mark.django_db
class TestImportBeir:
    def test_command_prints_the_contract_summary(self, tmp_path):
        folder = write_valid_folder(tmp_path / "small")

        summary = call_json_command("import_beir", folder, "--collection", "small")

        assert summary == {"collection": "small", "queries": 2, "passages": 4, "qrels": 3}

    def test_corpus_records_become_passages_in_file_order_with_titles_kept_apart(self, tmp_path):
        import_beir(write_valid_folder(tmp_path / "small"), collection_name="small")

        collection = Collection.objects.get(name="small")
        assert collection.kind == "beir" and not collection.documents.exists()
        passages = list(Passage.objects.filter(collection=collection).order_by("ordinal"))
        assert [(p.external_id, p.title, p.text, p.ordinal) for p in passages] == [
            ("d1", "Lamps", "Lamps give light.", 0),
            ("d2", "", "Rivers flood in spring.", 1),
            ("d3", "", "Bridges carry roads.", 2),
            ("d4", "", "Towns sleep at night.", 3),
        ]
        assert [p.retrieval_text for p in passages[:2]] == ["Lamps Lamps give light.", "Rivers flood in spring."]
        assert all(p.document is None and p.start is None for p in passages)

    def test_queries_and_qrels_keep_explicit_zero_scores(self, tmp_path):
        import_beir(write_valid_folder(tmp_path / "small"), collection_name="small")

        assert list(Query.objects.order_by("ordinal").values_list("external_id", "text", "ordinal")) == [
            ("q1", "what gives light", 0),
            ("q2", "what carries roads", 1),
        ]
        qrels = {(q.query.external_id, q.passage.external_id): q.relevance for q in Qrel.objects.all()}
        assert qrels == {("q1", "d1"): 1, ("q1", "d2"): 0, ("q2", "d3"): 2}

    def test_pools_keep_their_given_order(self, tmp_path):
        import_beir(write_valid_folder(tmp_path / "small"), collection_name="small")

        for query_id, pool in POOLS.items():
            entries = PoolEntry.objects.filter(query__external_id=query_id).order_by("position")
            assert [(e.position, e.passage.external_id) for e in entries] == list(enumerate(pool))

    def test_qrels_may_live_in_qrels_test_tsv_and_pools_are_optional(self, tmp_path):
        folder = write_valid_folder(tmp_path / "beir", qrels_name="qrels/test.tsv", pools=None)

        summary = import_beir(folder, collection_name="beir")

        assert summary["qrels"] == 3
        assert not PoolEntry.objects.exists()


def rewrite_line(folder, name: str, number: int, text: str):
    """Replace line `number` (1-based) of folder/name."""
    path = folder / name
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def changed_folder(**changes):
    return lambda folder: write_valid_folder(folder, **changes)


def folder_with_line(name: str, number: int, text: str):
    def write(folder):
        write_valid_folder(folder)
        rewrite_line(folder, name, number, text)

    return write


def folder_without(name: str):
    def write(folder):
        write_valid_folder(folder)
        (folder / name).unlink()

    return write


BAD_FOLDERS = {
    # name: (write the folder, fragments the error must contain; {dir} is the folder)
    "invalid-json-line": (
        folder_with_line("corpus.jsonl", 2, '{"_id": "d2", '),
        ["{dir}/corpus.jsonl:2:", "not valid JSON"],
    ),
    "line-not-an-object": (
        folder_with_line("queries.jsonl", 2, '["q2"]'),
        ["{dir}/queries.jsonl:2:", "expected a JSON object"],
    ),
    "missing-id": (
        changed_folder(queries=[QUERIES[0], {"text": "no id"}]),
        ["{dir}/queries.jsonl:2:", "field '_id'", "missing"],
    ),
    "missing-text": (
        changed_folder(corpus=[*CORPUS[:2], {"_id": "d3", "title": "T"}, CORPUS[3]]),
        ["{dir}/corpus.jsonl:3:", "field 'text': missing"],
    ),
    "text-not-a-string": (
        changed_folder(queries=[{"_id": "q1", "text": ["what"]}, QUERIES[1]]),
        ["{dir}/queries.jsonl:1:", "field 'text': expected a string, got array"],
    ),
    "duplicate-id": (
        changed_folder(corpus=[*CORPUS, {"_id": "d1", "text": "again"}]),
        ["{dir}/corpus.jsonl:5:", "field '_id': duplicate id 'd1' (first on line 1)"],
    ),
    "bad-header": (folder_with_line("qrels.tsv", 1, "qid\tdocid\trel"), ["{dir}/qrels.tsv:1:", "field 'header'"]),
    "qrel-unknown-query": (
        changed_folder(qrels=[("q1", "d1", 1), ("q9", "d1", 1)]),
        ["{dir}/qrels.tsv:3:", "field 'query-id': unknown query id 'q9'"],
    ),
    "qrel-unknown-corpus-id": (
        changed_folder(qrels=[("q1", "d9", 1)]),
        ["{dir}/qrels.tsv:2:", "field 'corpus-id': unknown corpus id 'd9'"],
    ),
    "non-integer-score": (
        changed_folder(qrels=[("q1", "d1", "1.5")]),
        ["{dir}/qrels.tsv:2:", "field 'score': '1.5' is not an integer"],
    ),
    "conflicting-scores": (
        changed_folder(qrels=[("q1", "d1", 1), ("q2", "d3", 1), ("q1", "d1", 2)]),
        ["{dir}/qrels.tsv:4:", "field 'score': conflicts with score 1 on line 2"],
    ),
    "wrong-column-count": (
        folder_with_line("qrels.tsv", 2, "q1\td1"),
        ["{dir}/qrels.tsv:2:", "expected 3 tab-separated columns"],
    ),
    "pool-unknown-corpus-id": (
        changed_folder(pools={"q1": ["d1"], "q2": ["d3", "d7"]}),
        ["{dir}/pools.jsonl:2:", "field 'corpus-ids[1]': unknown corpus id 'd7'"],
    ),
    "pool-unknown-query": (
        changed_folder(pools={"q5": ["d1"]}),
        ["{dir}/pools.jsonl:1:", "field 'query-id': unknown query id 'q5'"],
    ),
    "missing-corpus": (folder_without("corpus.jsonl"), ["{dir}/corpus.jsonl: file not found"]),
    "missing-qrels": (folder_without("qrels.tsv"), ["{dir}: missing qrels.tsv (or qrels/test.tsv)"]),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", BAD_FOLDERS, ids=list(BAD_FOLDERS))
def test_bad_input_names_the_problem_and_writes_nothing(tmp_path, case):
    write, fragments = BAD_FOLDERS[case]
    folder = tmp_path / "beir"
    write(folder)

    with pytest.raises(CommandError) as failure:
        call_command("import_beir", str(folder), "--collection", "beir")

    for fragment in fragments:
        assert fragment.format(dir=folder) in str(failure.value)
    assert retrieval_row_counts() == dict.fromkeys(retrieval_row_counts(), 0)


@pytest.mark.django_db
def test_an_existing_collection_name_is_refused_and_nothing_is_written(tmp_path):
    folder = write_valid_folder(tmp_path / "beir")
    make_collection("beir")
    before = retrieval_row_counts()

    with pytest.raises(CommandError, match="field 'collection': a collection named 'beir' already exists"):
        call_command("import_beir", str(folder), "--collection", "beir")

    assert retrieval_row_counts() == before


@pytest.mark.data
@pytest.mark.django_db
def test_birco_relic_dev(shared_data):
    folder = shared_data / "birco-relic-dev"

    summary = call_json_command("import_beir", folder, "--collection", "birco-relic-dev")

    assert summary == {"collection": "birco-relic-dev", "queries": 50, "passages": 2502, "qrels": 2533}
    assert Qrel.objects.filter(relevance=0).count() == 2483
    assert PoolEntry.objects.values("query").distinct().count() == 50
    first_pool = json.loads((folder / "pools.jsonl").read_text(encoding="utf-8").splitlines()[0])
    stored = PoolEntry.objects.filter(query__external_id=first_pool["query-id"]).order_by("position")
    assert [entry.passage.external_id for entry in stored] == first_pool["corpus-ids"]
