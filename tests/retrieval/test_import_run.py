"""import_run: a TREC run file from any system becomes a named run of the collection, evaluated
as ir-measures evaluates the same file; bad files are one-line errors with nothing written."""

import io
import json

import ir_measures
import pytest
from django.core.management import CommandError, call_command
from django.core.management import call_command as run_command
from ir_measures import RR, R, nDCG

from jobs.models import Job
from marginalia.celery import app
from retrieval.models import Hit, Retriever, Run, RunQuery
from retrieval.services.trec_files import uploads_folder
from tests.factories import (
    add_qrels,
    api_client,
    call_json_command,
    make_annotator,
    make_collection,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = pytest.mark.django_db

TEXTS = [
    "the lighthouse keeper counted ships at dusk",
    "salt pans on the marsh at low tide",
    "a ledger of weights and margins kept in ink",
    "the railway to the harbour and the salt marsh",
    "bells under the sea ring at low tide",
    "the keeper of the ledger walked to the harbour",
]
# Every relevant passage has a positive BM25 score for its query, so no BM25 tie involves one.
QRELS = {"q1": {"d0": 1, "d5": 2}, "q2": {"d1": 1}, "q3": {"d4": 1}}
# Written by hand, as another toolkit would: a tie (q1's d0/d4/d3 at 1.5; trec_eval puts the
# relevant d0 third), a query missing (q3), relevant passages not retrieved (q1's d5, q2's d1).
HAND_RUN = """q1 Q0 d0 1 1.5 other-system
q1 Q0 d4 2 1.5 other-system
q1 Q0 d3 3 1.5 other-system
q1 Q0 d1 4 0.25 other-system
q2 Q0 d3 1 7 other-system
q2 Q0 d0 2 -1e-3 other-system
"""


@pytest.fixture
def collection():
    collection = make_collection("tiny")
    passages = {f"d{i}": passage for i, passage in enumerate(make_text_passages(collection, TEXTS))}
    for name, passage in passages.items():
        passage.external_id = name
        passage.save(update_fields=["external_id"])
    queries = {
        "q1": make_text_query(collection, "lighthouse keeper ledger", "q1"),
        "q2": make_text_query(collection, "salt marsh tide", "q2"),
        "q3": make_text_query(collection, "bells under the sea", "q3"),
    }
    for qid, relevances in QRELS.items():
        add_qrels(queries[qid], {collection.passages.get(external_id=d): r for d, r in relevances.items()})
    return collection


def write(tmp_path, text: str, name: str = "run.trec"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def reference(run_text: str, measures) -> dict:
    """ir-measures' figures for the file. Its providers do not all break score ties alike (RR@k
    and RR disagree on a tie), so it gets the ranking in trec_eval's order (score, then docid
    descending) with untied scores; pytrec_eval's RR on the raw file checks that order."""
    qrels = [ir_measures.Qrel(q, d, r) for q, docs in QRELS.items() for d, r in docs.items()]
    scored = list(ir_measures.read_trec_run(io.StringIO(run_text)))
    ordered = sorted(scored, key=lambda doc: (doc.query_id, -doc.score, [-ord(c) for c in doc.doc_id]))
    untied = [ir_measures.ScoredDoc(doc.query_id, doc.doc_id, -float(rank)) for rank, doc in enumerate(ordered)]
    assert ir_measures.calc_aggregate([RR], qrels, untied) == ir_measures.calc_aggregate([RR], qrels, scored)
    return ir_measures.calc_aggregate(measures, qrels, untied)


def test_a_hand_written_run_with_ties_and_a_missing_query_scores_as_ir_measures(collection, tmp_path):
    summary = call_json_command("import_run", "tiny", write(tmp_path, HAND_RUN), "--name", "other")
    run = Run.objects.get(pk=summary["run_id"])
    assert summary == {
        "run_id": run.pk,
        "name": "other",
        "queries": 2,
        "hits": 6,
        "not_retrieved": 3,  # q1's d5, q2's d1, q3's d4
        "queries_without_ranking": 1,  # q3
    }
    assert run.retriever.kind == Retriever.Kind.IMPORTED and run.retriever.name == "imported other-system"
    # Ties in trec_eval's order: docid descending.
    assert list(
        Hit.objects.filter(run=run, query__external_id="q1").values_list("passage__external_id", flat=True)
    ) == [
        "d4",
        "d3",
        "d0",
        "d1",
    ]
    expected = reference(HAND_RUN, [R @ 1, R @ 3, R @ 5, R @ 10, R @ 100, RR @ 10, nDCG @ 10])
    metrics = run.metrics["metrics"]
    for measure, name in [(R @ 1, "recall@1"), (R @ 3, "recall@3"), (R @ 5, "recall@5"), (R @ 10, "recall@10")]:
        assert metrics[name] == pytest.approx(expected[measure], abs=1e-9)
    assert metrics["recall@100"] == pytest.approx(expected[R @ 100], abs=1e-9)
    assert metrics["mrr@10"] == pytest.approx(expected[RR @ 10], abs=1e-9)
    assert metrics["ndcg@10"] == pytest.approx(expected[nDCG @ 10], abs=1e-9)
    assert run.metrics["queries"] == 3


def test_export_then_import_gives_identical_metrics(collection, tmp_path):
    original = call_json_command("retrieve", "--collection", "tiny", "--retriever", "bm25", "--depth", "6")
    out = io.StringIO()
    call_command("export_run", original["run_id"], stdout=out)
    path = write(tmp_path, out.getvalue())
    imported = call_json_command("import_run", "tiny", path, "--name", "bm25 again")
    first = call_json_command("evaluate_run", original["run_id"])
    second = call_json_command("evaluate_run", imported["run_id"])
    assert second["metrics"] == first["metrics"] and second["stderr"] == first["stderr"]
    assert imported["hits"] == Hit.objects.filter(run_id=original["run_id"]).count()


BAD_FILES = [
    ("", "field 'file': the file has no run lines", None),
    ("q1 Q0 d1 1 0.5\n", "field 'columns': expected 6 columns", 1),
    ("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n", "field 'score': 'high' is not a number", 2),
    ("q1 Q0 d1 1 NaN t\n", "field 'score': 'NaN' is not a finite number", 1),
    ("q1 Q0 d1 one 0.5 t\n", "field 'rank': 'one' is not an integer", 1),
    ("q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n", "field 'docid': query q1 lists passage d1 again (first on line 1)", 2),
    ("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.9 t\n", "field 'rank': rank 2 has score 0.9, above rank 1's 0.5", 2),
    ("q1 Q0 d1 1 0.5 a\nq2 Q0 d2 1 0.5 b\n", "field 'tag': a second tag 'b' (line 1 has 'a')", 2),
    (
        "q1 Q0 d1 1 0.5 t\nqx Q0 d2 1 0.5 t\nqy Q0 d2 1 0.5 t\n",
        "field 'qid': 2 query ids are not in the collection (first: qx, qy)",
        2,
    ),
    ("q1 Q0 d1 1 0.5 t\nq1 Q0 zz 2 0.4 t\n", "field 'docid': 1 passage ids are not in the collection (first: zz)", 2),
    (b"q1 Q0 d1 1 0.5 t\nq1 Q0 \xff 2 0.4 t\n", "not UTF-8 text", 2),
]


@pytest.mark.parametrize(("content", "message", "line"), BAD_FILES)
def test_a_bad_run_file_is_one_line_naming_file_line_and_field_and_nothing_is_written(
    collection, tmp_path, content, message, line
):
    path = write(tmp_path, content)
    with pytest.raises(CommandError) as error:
        call_json_command("import_run", "tiny", path, "--name", "bad")
    where = f"{path}:{line}: " if line else f"{path}: "
    assert str(error.value).startswith(where) and message in str(error.value)
    assert "\n" not in str(error.value)
    assert not Run.objects.exists() and not Hit.objects.exists() and not RunQuery.objects.exists()
    assert not Retriever.objects.exists()


def test_a_taken_name_or_unknown_collection_is_refused(collection, tmp_path):
    path = write(tmp_path, HAND_RUN)
    call_json_command("import_run", "tiny", path, "--name", "taken")
    with pytest.raises(CommandError, match="field 'name': collection tiny already has a run named 'taken'"):
        call_json_command("import_run", "tiny", path, "--name", "taken")
    with pytest.raises(CommandError, match="field 'collection': no collection named 'nope'"):
        call_json_command("import_run", "nope", path, "--name", "new")
    assert Run.objects.count() == 1


def test_text_output_lists_the_summary(collection, tmp_path):
    out = io.StringIO()
    run_command("import_run", "tiny", str(write(tmp_path, HAND_RUN)), "--name", "text", stdout=out)
    assert "not_retrieved: 3" in out.getvalue()


# --- REST: POST /api/runs/import/ (multipart) ---------------------------------------------------


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setitem(app.conf, "task_always_eager", True)


def upload(client, collection, content: bytes, name="from api", filename="system.trec"):
    """POST the run file as a multipart upload named `filename`."""
    stream = io.BytesIO(content)
    stream.name = filename
    return client.post(
        "/api/runs/import/", {"collection": collection.pk, "name": name, "file": stream}, format="multipart"
    )


def test_staff_import_a_run_file_as_a_job(collection, eager, django_capture_on_commit_callbacks):
    client = api_client(make_user(staff=True))
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(client, collection, HAND_RUN.encode())
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.kind, job.queue, job.status) == ("import_run", "cpu", Job.Status.SUCCEEDED)
    run = Run.objects.get(name="from api")
    assert job.result == {**job.result, "run_id": run.pk, "hits": 6, "not_retrieved": 3}
    assert run.job_id == job.pk and run.parameters["file"] == "system.trec"
    assert not any(uploads_folder().iterdir())


def test_a_bad_upload_is_a_400_naming_the_uploaded_file_and_line(collection):
    client = api_client(make_user(staff=True))
    response = upload(client, collection, b"q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n", filename="mine.trec")
    assert response.status_code == 400
    assert response.json() == {
        "docid": ["mine.trec:2: field 'docid': query q1 lists passage d1 again (first on line 1)"]
    }
    assert not Job.objects.exists() and not Run.objects.exists()
    assert not any(uploads_folder().iterdir())


def test_a_taken_name_or_missing_file_is_a_400(collection):
    client = api_client(make_user(staff=True))
    Run.objects.create(collection=collection, retriever=Retriever.objects.create(name="r", kind="bm25"), name="taken")
    assert upload(client, collection, HAND_RUN.encode(), name="taken").json().keys() == {"name"}
    response = client.post("/api/runs/import/", {"collection": collection.pk, "name": "x"}, format="multipart")
    assert response.status_code == 400 and "file" in response.json()
    assert not Job.objects.exists()


@pytest.mark.parametrize("who", ["anonymous", "annotator", "plain user"])
def test_only_staff_may_import_runs(collection, who):
    user = {"anonymous": None, "annotator": make_annotator(), "plain user": make_user()}[who]
    response = upload(api_client(user), collection, HAND_RUN.encode())
    assert response.status_code in (401, 403)
    assert not Job.objects.exists() and not Run.objects.exists()
    assert not uploads_folder().exists() or not any(uploads_folder().iterdir())


def test_imported_runs_are_listed_with_their_name(collection, tmp_path):
    call_json_command("import_run", "tiny", write(tmp_path, HAND_RUN), "--name", "listed")
    listed = api_client(make_user(staff=True)).get("/api/runs/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [(row["name"], row["retriever"]["kind"]) for row in rows] == [("listed", "imported")]
    assert json.loads(json.dumps(rows[0]["parameters"]))["tag"] == "other-system"
