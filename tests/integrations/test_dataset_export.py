"""`export_dataset`: a study's items with what was shown, the known answer, every human answer
and model/judge answers, as a Hugging Face dataset (Parquet or save_to_disk). Read back with
pyarrow and `datasets` and checked against the database and an independent argmax of the run's
scores; another app's answers arrive through the answer-source setting."""

import json

import datasets
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from annotation.models import Item, ItemCandidate, Judgment
from annotation.services import void_judgment
from retrieval.models import Hit
from tests.factories import (
    add_judgment,
    add_label_judgment,
    call_json_command,
    make_annotator,
    make_plot_relevance_study,
    make_relic_collection,
    make_relic_proxy_study,
    make_scored_run,
    make_user,
)

pytestmark = pytest.mark.django_db


def judge_answers(study):
    """An answer source as judges/ would provide one: a label and rationale per item."""
    return {item.pk: [{"model": "judge-llm", "label": 1, "rationale": "quoted"}] for item in study.items.all()}


@pytest.fixture
def proxy_study():
    collection = make_relic_collection(4)
    study = make_relic_proxy_study(4, collection=collection, judgments_per_item=2)
    reader, other = make_annotator("reader"), make_annotator("other")
    for item in study.items.order_by("position"):
        add_judgment(item, reader, position=0)
        add_judgment(item, other, position=1)
    void_judgment(Judgment.objects.filter(annotator=other).first(), by=make_user(staff=True), reason="test")
    return study


def test_the_parquet_rows_carry_the_items_as_shown_and_every_human_answer(proxy_study, tmp_path):
    summary = call_json_command("export_dataset", proxy_study.pk, tmp_path / "out")
    assert summary["items"] == 4 and summary["human_answers"] == 8 and summary["files"] == ["items.parquet"]
    rows = pq.read_table(tmp_path / "out" / "items.parquet").to_pylist()
    assert [row["item"] for row in rows] == list(proxy_study.items.order_by("position").values_list("pk", flat=True))
    for row in rows:
        shown = ItemCandidate.objects.filter(item_id=row["item"]).order_by("position")
        assert [c["passage"] for c in row["candidates"]] == [c.passage.external_id for c in shown]
        assert row["gold_position"] == shown.get(is_gold=True).position
        stored = Judgment.objects.filter(item_id=row["item"]).order_by("submitted_at", "pk")
        assert [(a["annotator"], a["position"], a["voided"]) for a in row["human_answers"]] == [
            (j.annotator.username, j.choice.position, j.voided) for j in stored
        ]
        assert len(row["context_left"]) == proxy_study.context_left and row["kind"] == "proxy"
    assert sum(a["voided"] for row in rows for a in row["human_answers"]) == 1


def test_a_runs_answer_is_its_highest_scoring_shown_candidate(proxy_study, tmp_path):
    run = proxy_study.negatives_run
    call_json_command("export_dataset", proxy_study.pk, tmp_path / "out", "--model-run", run.pk)
    rows = pq.read_table(tmp_path / "out" / "items.parquet").to_pylist()
    for row in rows:
        item = Item.objects.get(pk=row["item"])
        scores = {hit.passage_id: (hit.score, -hit.rank) for hit in Hit.objects.filter(run=run, query=item.query)}
        shown = list(ItemCandidate.objects.filter(item=item).order_by("position"))
        scored = [(scores[c.passage_id], c.position) for c in shown if c.passage_id in scores]
        expected = max(scored)[1] if scored else None
        answers = [a for a in row["model_answers"] if a["source"] == "run"]
        assert [a["position"] for a in answers] == ([expected] if expected is not None else [])


def test_save_to_disk_loads_back_with_datasets_and_judges_join_through_the_setting(proxy_study, tmp_path, settings):
    settings.MARGINALIA_DATASET_ANSWER_SOURCES = ["tests.integrations.test_dataset_export.judge_answers"]
    call_json_command("export_dataset", proxy_study.pk, tmp_path / "disk", "--format", "disk")
    dataset = datasets.load_from_disk(str(tmp_path / "disk"))
    assert len(dataset) == 4
    judge = dataset[0]["model_answers"][0]
    assert judge["model"] == "judge-llm" and json.loads(judge["label"]) == 1 and judge["rationale"] == "quoted"
    assert judge["source"] == "tests.integrations.test_dataset_export.judge_answers"
    parquet = call_json_command("export_dataset", proxy_study.pk, tmp_path / "pq")
    loaded = datasets.load_dataset(
        "parquet", data_files=parquet["out"] + "/items.parquet", split="train", cache_dir=str(tmp_path / "cache")
    )
    assert loaded.to_list() == dataset.to_list()


def test_label_studies_keep_labels_as_json_and_runs_give_their_scores(tmp_path):
    study = make_plot_relevance_study()
    annotator = make_annotator()
    first = study.items.order_by("position").first()
    add_label_judgment(first, annotator, label=2, rationale="plot matches")
    [run] = study.parameters["runs"]
    summary = call_json_command("export_dataset", study.pk, tmp_path / "out", "--model-run", run)
    rows = pq.read_table(tmp_path / "out" / "items.parquet").to_pylist()
    assert summary["items"] == len(rows) == study.items.count()
    answered = next(row for row in rows if row["item"] == first.pk)
    assert json.loads(answered["human_answers"][0]["label"]) == 2 and answered["gold_position"] is None
    assert summary["model_answers"] == len(rows)  # the run scored every pair it proposed
    assert all(a["score"] is not None and a["position"] == 0 for row in rows for a in row["model_answers"])


def test_bad_input_is_one_line_and_writes_nothing(proxy_study, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    with pytest.raises(CommandError, match="out"):
        call_command("export_dataset", proxy_study.pk, taken)
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]
    with pytest.raises(CommandError, match="model_run"):
        call_command("export_dataset", proxy_study.pk, tmp_path / "a", "--model-run", "999999")
    foreign = make_scored_run(make_relic_collection(1, name="elsewhere"), {})
    with pytest.raises(CommandError, match="another collection"):
        call_command("export_dataset", proxy_study.pk, tmp_path / "b", "--model-run", str(foreign.pk))
    with pytest.raises(CommandError, match="study"):
        call_command("export_dataset", "999999", tmp_path / "c")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
