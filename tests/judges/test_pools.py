"""A judge's labels over a pool become qrels: judge_pool over a collection's qrels pairs, a
relevance study's items of every role and runs' top k, against a real OpenAI-compatible server
process; qrels imported as a judge's labels (import_judge_labels), versioned, and refused with
one line naming the file, line and field, nothing written; UMBRELA's prompt and the ensemble
backend."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Item
from judges.models import Judge, JudgeAnswer
from judges.prompts import BUILT_IN_PROMPTS, UMBRELA, item_prompt, pair_prompt
from judges.services import register_judge
from retrieval.errors import InputError
from retrieval.qrels_sources import load_qrels
from tests.factories import (
    add_hits,
    add_label_item,
    call_json_command,
    make_label_collection,
    make_label_study,
    make_run,
)

pytestmark = pytest.mark.django_db


def endpoint(server, name="labeller", **settings):
    return register_judge(name, "openai", {"base_url": server.base_url, "model": "m", "retries": 0, **settings})


def qrels_of(collection, source) -> dict:
    return {(q, p): r for q, _, p, r in (line.split() for line in load_qrels(collection, source).trec_lines())}


def test_a_judge_labels_every_qrels_pair_of_a_collection_and_its_labels_are_the_judges_qrels(chat_server):
    server = chat_server("--answer", "SCORE: 7")
    collection = make_label_collection(n_queries=2, n_passages=3)
    endpoint(server)

    summary = call_json_command("judge_pool", "--judge", "labeller", "--collection", collection.name)

    assert (summary["pairs"], summary["answered"], summary["failed"], summary["asked"]) == (2, 2, 0, 2)
    assert set(qrels_of(collection, "judge:labeller").values()) == {"7"}
    assert qrels_of(collection, "judge:labeller").keys() == qrels_of(collection, "imported").keys()
    again = call_json_command("judge_pool", "--judge", "labeller", "--collection", collection.name)
    assert again["asked"] == 0 and len(server.requests()) == 2


def test_a_study_pool_takes_every_item_and_reuses_what_the_judge_answered_for_the_work_items(chat_server):
    server = chat_server("--answer", "SCORE: 2")
    study = make_label_study(items=2, label_schema={"scale": "graded-0-3"})
    add_label_item(study, role=Item.Role.GOLD, expected_label=3)
    endpoint(server)
    call_json_command("judge_study", str(study.pk), "--judge", "labeller")
    assert len(server.requests()) == 2  # work items only

    summary = call_json_command("judge_pool", "--judge", "labeller", "--study", str(study.pk))

    assert (summary["pairs"], summary["reused"], summary["asked"]) == (3, 2, 1)
    assert len(server.requests()) == 3  # the gold item's pair alone was asked
    assert len(qrels_of(study.collection, "judge:labeller")) == 3


def test_runs_pool_is_the_union_of_their_top_k(chat_server):
    server = chat_server("--answer", "SCORE: 1")
    collection = make_label_collection(n_queries=1, n_passages=4)
    query = collection.queries.get()
    passages = list(collection.passages.order_by("ordinal"))
    first, second = make_run(collection), make_run(collection)
    add_hits(first, query, [(passages[0], 3.0), (passages[1], 2.0), (passages[3], 1.0)])
    add_hits(second, query, [(passages[2], 3.0), (passages[1], 2.0)])
    endpoint(server)

    summary = call_json_command(
        "judge_pool",
        "--judge",
        "labeller",
        "--collection",
        collection.name,
        "--runs",
        f"{first.pk},{second.pk}",
        "--depth",
        "2",
    )

    assert summary["pairs"] == 3  # d0, d1 from the first run's top 2; d2 from the second's
    assert {p for _, p in qrels_of(collection, "judge:labeller")} == {passages[i].external_id for i in (0, 1, 2)}


def test_imported_labels_are_a_judges_qrels_and_a_new_file_is_a_new_version(tmp_path):
    collection = make_label_collection(n_queries=2, n_passages=3)
    four_columns, three_columns = tmp_path / "a.qrels", tmp_path / "b.qrels"
    four_columns.write_text("q0 0 d0 2\nq0 0 d1 0\nq1 0 d2 1\n")
    three_columns.write_text("q0 d0 0\n")

    first = call_json_command("import_judge_labels", "umbrela-lab", four_columns, "--collection", collection.name)
    again = call_json_command("import_judge_labels", "umbrela-lab", four_columns, "--collection", collection.name)
    assert (first["judge"], first["labels"], first["version"], first["new"]) == ("umbrela-lab", 3, 1, True)
    assert (again["version"], again["new"]) == (1, False)
    assert qrels_of(collection, "judge:umbrela-lab") == {("q0", "d0"): "2", ("q0", "d1"): "0", ("q1", "d2"): "1"}

    second = call_json_command("import_judge_labels", "umbrela-lab", three_columns, "--collection", collection.name)
    assert (second["version"], second["labels"]) == (2, 1)
    assert qrels_of(collection, "judge:umbrela-lab") == {("q0", "d0"): "0"}
    assert Judge.objects.get(name="umbrela-lab", version=1).answers.count() == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("q0 0 d0 2\nq9 0 d1 1\n", "bad.qrels:2: field 'query-id': unknown query id 'q9'"),
        ("q0 0 d0 2\nq0 0 nowhere 1\n", "bad.qrels:2: field 'corpus-id': unknown passage id 'nowhere'"),
        ("q0 0 d0 two\n", "bad.qrels:1: field 'relevance': 'two' is not an integer"),
        ("q0 0 d0 ٣\n", "bad.qrels:1: field 'relevance': '٣' is not an integer"),
        ("q0 0 d0 1 extra\n", "bad.qrels:1: expected 'qid 0 docid relevance'"),
        ("q0 0 d0 1\nq0 0 d0 0\n", "bad.qrels:2: field 'relevance': conflicts with relevance 1 on line 1"),
        ("", "bad.qrels: no qrels"),
        ("q0 0 d0 99999999999\n", "bad.qrels:1: field 'relevance': 99999999999 is out of range"),
    ],
)
def test_a_bad_qrels_file_is_one_line_naming_file_line_and_field_and_writes_nothing(tmp_path, content, message):
    collection = make_label_collection(n_queries=2, n_passages=3)
    path = tmp_path / "bad.qrels"
    path.write_text(content)

    with pytest.raises(CommandError) as refused:
        call_command("import_judge_labels", "lab", str(path), "--collection", collection.name)

    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert not Judge.objects.filter(name="lab").exists() and not JudgeAnswer.objects.exists()


def test_bytes_that_are_no_text_and_a_missing_file_are_refused_in_one_line(tmp_path):
    collection = make_label_collection()
    path = tmp_path / "binary.qrels"
    path.write_bytes(b"q0 0 d0 \xff\xfe\x00\n")
    for target in (path, tmp_path / "missing.qrels"):
        with pytest.raises(CommandError) as refused:
            call_command("import_judge_labels", "lab", str(target), "--collection", collection.name)
        assert target.name in str(refused.value) and "\n" not in str(refused.value)
    assert not Judge.objects.filter(name="lab").exists()


def test_an_imported_judge_is_made_only_by_importing_and_labels_no_pool(tmp_path):
    collection = make_label_collection()
    with pytest.raises(InputError, match="import_judge_labels"):
        register_judge("sneaky", "imported", {"collection": collection.pk, "sha256": "0" * 64})
    path = tmp_path / "a.qrels"
    path.write_text("q0 0 d0 1\n")
    call_json_command("import_judge_labels", "lab", path, "--collection", collection.name)
    with pytest.raises(CommandError, match="imported judge: it answers no prompts"):
        call_command("judge_pool", "--judge", "lab", "--collection", collection.name)


def test_umbrela_is_asked_word_for_word_and_read_on_a_0_to_3_scale(chat_server):
    server = chat_server("--answer", "##final score: 3")
    study = make_label_study(items=1, label_schema={"scale": "graded-0-3"})
    judge = endpoint(server, prompt=UMBRELA)

    summary = call_json_command("judge_study", str(study.pk), "--judge", judge.name)

    assert summary["answered"] == 1
    assert JudgeAnswer.objects.get().parsed == {"label": 3}
    prompt = item_prompt(study.items.get(), UMBRELA)
    assert prompt.text.startswith("Given a query and a passage, you must provide a score on an integer scale of 0 to 3")
    assert prompt.text.endswith(
        "Provide each score in the format of: ##final score: score without providing any reasoning."
    )
    assert prompt.options == BUILT_IN_PROMPTS[UMBRELA]
    assert pair_prompt("q", "p", "", UMBRELA).kind == "score"


def test_umbrela_refuses_a_scale_it_does_not_answer_on_and_an_unknown_prompt_is_refused():
    study = make_label_study(items=1, label_schema={"scale": "0-10"})
    with pytest.raises(InputError, match=r"settings\.prompt.*answers \[0, 1, 2, 3\]"):
        item_prompt(study.items.get(), UMBRELA)
    with pytest.raises(InputError, match=r"settings\.prompt"):
        register_judge("odd", "local", {"prompt": "telepathy"})
    assert "prompt" not in register_judge("plain", "local", {"prompt": ""}).settings


def test_an_ensemble_answers_the_majority_or_the_mean_of_its_members(chat_server):
    answers = {"a": "SCORE: 3", "b": "SCORE: 0", "c": "SCORE: 0"}
    members = [endpoint(chat_server("--answer", text), name=name) for name, text in answers.items()]
    study = make_label_study(items=2, label_schema={"scale": "graded-0-3"})
    majority = register_judge("vote", "ensemble", {"members": ["a", "b", "c"]})
    mean = register_judge("average", "ensemble", {"members": ["a", "b", "c"], "combine": "mean"})
    assert majority.settings["members"] == [{"judge": m.pk, "name": m.name, "version": 1} for m in members]

    call_json_command("judge_study", str(study.pk), "--judge", "vote")
    call_json_command("judge_study", str(study.pk), "--judge", "average")

    assert [a.parsed for a in JudgeAnswer.objects.filter(judge=majority)] == [{"label": 0}] * 2
    assert [a.parsed for a in JudgeAnswer.objects.filter(judge=mean)] == [{"label": 1}] * 2  # mean 1.0
    raw = JudgeAnswer.objects.filter(judge=mean).first().raw_response
    assert '"a v1": "SCORE: 3"' in raw and '"b v1": "SCORE: 0"' in raw


def test_an_ensemble_reuses_what_its_members_answered_and_fails_only_when_none_answered(chat_server):
    server = chat_server("--answer", "SCORE: 2")
    silent = chat_server("--answer", "no idea")
    endpoint(server, name="a")
    endpoint(silent, name="mute")
    study = make_label_study(items=2, label_schema={"scale": "graded-0-3"})
    call_json_command("judge_study", str(study.pk), "--judge", "a")
    register_judge("pair", "ensemble", {"members": ["a", "mute"]})

    call_json_command("judge_study", str(study.pk), "--judge", "pair")

    assert len(server.requests()) == 2  # a's answers were stored: not asked again
    assert len(silent.requests()) == 2
    assert {str(a.parsed) for a in JudgeAnswer.objects.filter(judge__name="pair")} == {"{'label': 2}"}
    register_judge("hush", "ensemble", {"members": ["mute", "a"], "combine": "mean"})
    call_json_command("judge_study", str(study.pk), "--judge", "hush")
    assert JudgeAnswer.objects.filter(judge__name="hush", parsed__isnull=False).count() == 2


@pytest.mark.parametrize(
    ("members", "field"),
    [(["a"], "settings.members"), (["a", "a"], "settings.members"), (["a", "ghost"], "settings.members")],
)
def test_an_ensemble_needs_two_different_judges_that_answer_prompts(chat_server, members, field):
    endpoint(chat_server("--answer", "SCORE: 1"), name="a")
    with pytest.raises(InputError) as refused:
        register_judge("bad", "ensemble", {"members": members})
    assert refused.value.field == field
