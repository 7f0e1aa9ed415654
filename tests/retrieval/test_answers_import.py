"""Generated answers as an answers collection: each system's answers a run of it, each query's
answers its pool, so a preference study over the systems' runs asks which system's answer people
prefer; the system never shows to annotators. Bad files are refused with one line and write nothing."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError

from annotation.services import create_preference_study, import_judgments
from evaluation.preference_scores import preference_scores
from retrieval.models import Collection, Passage, PoolEntry, Query, Retriever, Run
from tests.factories import api_client, call_json_command, make_annotator, make_label_collection, write_jsonl

pytestmark = pytest.mark.django_db

SYSTEMS = {"rag-large": "A full answer about story {n}.", "rag-small": "Story {n}? No idea."}


def answer_rows(queries=("q0", "q1", "q2")) -> list[dict]:
    return [
        {"query": query, "system": system, "text": text.format(n=query[1:])}
        for query in queries
        for system, text in SYSTEMS.items()
    ]


def test_answers_become_one_run_per_system_with_each_querys_answers_as_its_pool(tmp_path):
    source = make_label_collection(3, 4)
    write_jsonl(tmp_path / "answers.jsonl", answer_rows())
    summary = call_json_command(
        "import_answers", tmp_path / "answers.jsonl", "--collection", "answers", "--queries-from", source.name
    )
    collection = Collection.objects.get(name="answers")
    assert collection.kind == Collection.Kind.ANSWERS
    assert summary == {
        "collection": "answers",
        "systems": {name: Run.objects.get(collection=collection, name=name).pk for name in SYSTEMS},
        "queries": 3,
        "answers": 6,
    }
    copied = Query.objects.get(collection=collection, external_id="q1")
    assert copied.text == source.queries.get(external_id="q1").text
    for name, text in SYSTEMS.items():
        run = Run.objects.get(collection=collection, name=name)
        assert run.status == Run.Status.DONE and run.retriever.kind == Retriever.Kind.IMPORTED
        hits = list(run.hits.order_by("query__external_id").values_list("query__external_id", "passage__text", "rank"))
        assert hits == [(f"q{n}", text.format(n=n), 1) for n in range(3)]
    assert all(passage.title == "" for passage in Passage.objects.filter(collection=collection))
    assert PoolEntry.objects.filter(query__collection=collection).count() == 6


@pytest.mark.parametrize(
    "rows, line, field",
    [
        ([{"query": "q0", "system": "a", "text": "x"}, {"query": "q0", "system": "a", "text": "y"}], 2, "query"),
        ([{"query": "q0", "system": "a", "text": "  "}], 1, "text"),
        ([{"query": "q0", "system": "a/b", "text": "x"}], 1, "system"),
        ([{"query": "elsewhere", "system": "a", "text": "x"}], 1, "query"),
        ([{"query": "q0", "system": ["a"], "text": "x"}], 1, "system"),
    ],
)
def test_a_bad_row_is_one_line_naming_line_and_field_and_nothing_is_written(tmp_path, rows, line, field):
    source = make_label_collection(1, 2)
    write_jsonl(tmp_path / "answers.jsonl", rows)
    with pytest.raises(CommandError) as refusal:
        call_json_command(
            "import_answers", tmp_path / "answers.jsonl", "--collection", "answers", "--queries-from", source.name
        )
    assert f"answers.jsonl:{line}: field '{field}'" in str(refusal.value)
    assert not Collection.objects.filter(name="answers").exists() and not Run.objects.exists()


def test_a_system_is_imported_once_and_new_queries_take_their_text_from_the_row(tmp_path):
    write_jsonl(tmp_path / "first.jsonl", [{"query": "new", "system": "a", "text": "x", "query_text": "Why?"}])
    call_json_command("import_answers", tmp_path / "first.jsonl", "--collection", "answers")
    assert Query.objects.get(external_id="new").text == "Why?"
    write_jsonl(tmp_path / "again.jsonl", [{"query": "new", "system": "a", "text": "y"}])
    with pytest.raises(CommandError, match=r"again\.jsonl:1: field 'system': system 'a' was imported"):
        call_json_command("import_answers", tmp_path / "again.jsonl", "--collection", "answers")
    source = make_label_collection(1, 2)
    with pytest.raises(CommandError, match="holds beir data"):
        call_json_command("import_answers", tmp_path / "again.jsonl", "--collection", source.name)


def test_a_preference_study_over_the_systems_scores_them_and_hides_who_wrote_what(tmp_path):
    source = make_label_collection(3, 4)
    write_jsonl(tmp_path / "answers.jsonl", answer_rows())
    summary = call_json_command(
        "import_answers", tmp_path / "answers.jsonl", "--collection", "answers", "--queries-from", source.name
    )
    collection = Collection.objects.get(name="answers")
    runs = list(Run.objects.filter(pk__in=summary["systems"].values()))
    study = create_preference_study(
        name="which answer", collection=collection, runs=runs, depth=1, design="all-pairs", judgments_per_item=1
    ).study
    assert study.items.count() == 3

    annotator = make_annotator()
    payload = api_client(annotator).get(f"/api/annotate/{study.pk}/next/").content.decode()
    for name in SYSTEMS:
        assert name not in payload
    assert "A full answer" in payload or "No idea" in payload

    rows = []
    for item in study.items.prefetch_related("candidates__passage"):
        shown = [c.passage for c in sorted(item.candidates.all(), key=lambda c: c.position)]
        better = next(p for p in shown if p.external_id.startswith("rag-large"))
        rows.append({"item": item.pk, "annotator": annotator.username, "preferred": better.external_id})
    write_jsonl(tmp_path / "prefs.jsonl", rows)
    import_judgments(study, tmp_path / "prefs.jsonl")
    systems = preference_scores(study, resamples=0)["systems"]
    assert list(systems) == ["rag-large", "rag-small"]
    assert systems["rag-large"]["score"] > 0 > systems["rag-small"]["score"]
    assert (systems["rag-large"]["wins"], systems["rag-large"]["losses"], systems["rag-small"]["wins"]) == (3, 0, 0)
    assert systems["rag-large"]["score"] + systems["rag-small"]["score"] == pytest.approx(0)
