"""Qrels from a relevance study: aggregation rules, adjudication, the export_qrels command, the
REST export, and the round trip through import_beir, retrieve and evaluate_run.

The study (graded 0-2; three annotators unless said; qC-d2 nobody judged):

    pair     labels    majority      mean -> nearest   median
    qA d0    2 2 1     2             1.67 -> 2         2
    qA d1    0 0 0     0             0    -> 0         0
    qA d3    0 1 2     tie -> 0      1    -> 1         1
    qA d5    1 1 2     1             1.33 -> 1         1
    qB d1    1 2       tie -> 1      1.5  -> 1 (tie)   1.5 -> 1 (tie)
    qB d4    0 0 2     0             0.67 -> 1         0
    qB d5    0 0 1     adjudicated 2 (whatever the aggregate)
"""

import io
import json
import math

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Adjudication, Item
from evaluation.label_models import aggregate
from evaluation.qrels import aggregate_labels, nearest_scale_value, relevance_qrels
from retrieval.errors import InputError
from retrieval.models import Hit
from tests.factories import (
    add_label_item,
    add_label_judgment,
    add_pool,
    call_json_command,
    make_label_study,
    make_text_passages,
    make_text_query,
    make_user,
    response_text,
)

PASSAGES = [
    "The detective burns the letter in the fireplace.",
    "A storm traps the travellers at the old inn.",
    "The gardener waters the roses every morning.",
    "The letter reveals the detective's secret past.",
    "Sailors hoist the sails before the storm reaches the inn.",
    "The inn keeper hides a letter from the detective.",
]
QUERIES = {"qA": "the detective and the letter", "qB": "travellers at an inn in a storm", "qC": "roses in the garden"}
LABELS = {
    ("qA", "d0"): [2, 2, 1],
    ("qA", "d1"): [0, 0, 0],
    ("qA", "d3"): [0, 1, 2],
    ("qA", "d5"): [1, 1, 2],
    ("qB", "d1"): [1, 2],
    ("qB", "d4"): [0, 0, 2],
    ("qB", "d5"): [0, 0, 1],
    ("qC", "d2"): [],
}
MAJORITY = ["qA 0 d0 2", "qA 0 d1 0", "qA 0 d3 0", "qA 0 d5 1", "qB 0 d1 1", "qB 0 d4 0", "qB 0 d5 2"]
MEAN = ["qA 0 d0 2", "qA 0 d1 0", "qA 0 d3 1", "qA 0 d5 1", "qB 0 d1 1", "qB 0 d4 1", "qB 0 d5 2"]
MEDIAN = ["qA 0 d0 2", "qA 0 d1 0", "qA 0 d3 1", "qA 0 d5 1", "qB 0 d1 1", "qB 0 d4 0", "qB 0 d5 2"]


@pytest.fixture
def study(db):
    study = make_label_study(label_schema={"scale": "graded-0-2"})
    passages = {p.external_id: p for p in make_text_passages(study.collection, PASSAGES)}
    queries = {name: make_text_query(study.collection, text, external_id=name) for name, text in QUERIES.items()}
    annotators = [make_user() for _ in range(3)]
    items = {}
    for (query, passage), labels in LABELS.items():
        items[query, passage] = add_label_item(study, query=queries[query], passages=[passages[passage]])
        for annotator, label in zip(annotators, labels):
            add_label_judgment(items[query, passage], annotator, label)
    Adjudication.objects.create(item=items["qB", "d5"], label=2)
    # A hidden gold item on a judged pair: a check on annotators, never ground truth.
    gold = add_label_item(study, role=Item.Role.GOLD, expected_label=0, query=queries["qC"], passages=[passages["d0"]])
    add_label_judgment(gold, annotators[0], 2)
    return study


@pytest.mark.parametrize(
    "aggregate, expected, ties", [("majority", MAJORITY, 2), ("mean", MEAN, 1), ("median", MEDIAN, 1)]
)
def test_aggregated_labels_become_qrels(study, aggregate, expected, ties):
    export = relevance_qrels(study, aggregate)
    assert export.lines() == expected
    assert export.summary() == {
        "study": study.pk,
        "aggregate": aggregate,
        "qrels": 7,
        "queries": 2,
        "relevant": sum(int(line[-1]) > 0 for line in expected),
        "ties": ties,
        "adjudicated": 1,
        "unjudged": 1,
        # qA d1 is unanimous, qB d5 adjudicated, the rest aggregated (by `aggregate`).
        "label_sources": {"adjudicated": 1, "unanimous": 1, "single": 0, "aggregated": 5},
        "sent_back": 0,
    }


def test_ties_go_to_the_lower_label():
    assert aggregate_labels([2, 0], "majority", [0, 1, 2]) == (0, True)
    assert aggregate_labels([0, 1], "mean", [0, 1]) == (0, True)
    assert aggregate_labels([1, 2, 2, 1], "median", [0, 1, 2]) == (1, True)
    assert aggregate_labels([0, 2, 2], "mean", [0, 1, 2]) == (1, False)
    assert nearest_scale_value(6.5, list(range(11))) == (6, True)
    assert nearest_scale_value(1.0, [0, 2]) == (0, True)  # a scale may skip values


def test_only_relevance_studies_export_qrels(db):
    with pytest.raises(InputError, match="quotability study"):
        relevance_qrels(make_label_study(kind="quotability", items=1))
    with pytest.raises(InputError, match="unknown aggregate"):
        relevance_qrels(make_label_study(items=1), "mode")


class TestCommand:
    def test_without_a_file_only_the_lines_go_to_stdout(self, study):
        out = io.StringIO()
        call_command("export_qrels", str(study.pk), stdout=out)
        assert out.getvalue().splitlines() == MAJORITY

    def test_out_writes_a_file_and_prints_the_summary(self, study, tmp_path):
        target = tmp_path / "sub" / "study.qrels"
        summary = call_json_command("export_qrels", study.pk, "--aggregate", "median", "--out", target)
        assert target.read_text().splitlines() == MEDIAN
        assert (summary["qrels"], summary["aggregate"], summary["out"]) == (7, "median", str(target))

    def test_bad_input_is_a_one_line_error(self, study, tmp_path):
        with pytest.raises(CommandError, match="no study with id 999999"):
            call_command("export_qrels", "999999", stdout=io.StringIO())
        with pytest.raises(CommandError, match="invalid choice"):
            call_command("export_qrels", str(study.pk), "--aggregate", "mode", stdout=io.StringIO())
        taken = tmp_path / "taken"
        taken.mkdir()
        (taken / "notes.txt").write_text("keep me")
        with pytest.raises(CommandError, match="new or empty folder"):
            call_command(
                "export_qrels", str(study.pk), "--beir", str(taken), "--out", str(tmp_path / "q"), stdout=io.StringIO()
            )
        assert sorted(path.name for path in taken.iterdir()) == ["notes.txt"]

    def test_the_beir_folder_carries_pools(self, study, tmp_path):
        query = study.collection.queries.get(external_id="qC")
        add_pool(query, list(study.collection.passages.order_by("ordinal")[:2]))
        call_json_command("export_qrels", study.pk, "--beir", tmp_path / "beir")
        pools = [json.loads(line) for line in (tmp_path / "beir" / "pools.jsonl").read_text().splitlines()]
        assert pools == [{"query-id": "qC", "corpus-ids": ["d0", "d1"]}]


def _dcg(gains):
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def hand_metrics(qrels: dict[str, dict[str, int]], ranking: dict[str, list[str]]) -> dict[str, float]:
    """The metrics of DESIGN.md worked out directly from a qrels file and a full ranking."""
    per_query = []
    for query, judged in qrels.items():
        relevant = {passage: grade for passage, grade in judged.items() if grade > 0}
        if not relevant:
            continue
        ranks = {passage: ranking[query].index(passage) + 1 for passage in relevant}
        values = {
            f"recall@{k}": sum(rank <= k for rank in ranks.values()) / len(relevant) for k in (1, 3, 5, 10, 50, 100)
        }
        values["mean_rank"] = min(ranks.values())
        values["mrr@10"] = 1 / min(ranks.values()) if min(ranks.values()) <= 10 else 0.0
        gains = [relevant.get(passage, 0) for passage in ranking[query][:10]]
        values["ndcg@10"] = _dcg(gains) / _dcg(sorted(relevant.values(), reverse=True)[:10])
        values["n_rodcg@10"] = _dcg([float(passage in relevant) for passage in ranking[query][:10]]) / _dcg(
            [1.0] * min(len(relevant), 10)
        )
        per_query.append(values)
    return {name: sum(values[name] for values in per_query) / len(per_query) for name in per_query[0]}


def test_exported_qrels_round_trip_through_import_beir_and_evaluate_run(study, tmp_path):
    folder = tmp_path / "beir"
    summary = call_json_command("export_qrels", study.pk, "--beir", folder)
    assert summary["beir"] == str(folder)
    assert sorted(path.name for path in folder.iterdir()) == ["corpus.jsonl", "qrels.tsv", "queries.jsonl"]
    qrels_lines = (folder / "qrels.tsv").read_text().splitlines()
    assert qrels_lines[0] == "query-id\tcorpus-id\tscore"
    assert [line.replace("\t", " 0 ", 1).replace("\t", " ") for line in qrels_lines[1:]] == MAJORITY

    imported = call_json_command("import_beir", folder, "--collection", "from-study")
    assert (imported["queries"], imported["passages"], imported["qrels"]) == (3, 6, 7)
    run_id = call_json_command("retrieve", "--collection", "from-study", "--retriever", "bm25")["run_id"]
    evaluation = call_json_command("evaluate_run", run_id)

    qrels: dict[str, dict[str, int]] = {}
    for line in MAJORITY:
        query, _, passage, grade = line.split()
        qrels.setdefault(query, {})[passage] = int(grade)
    ranking: dict[str, list[str]] = {}
    for query, passage in (
        Hit.objects.filter(run_id=run_id)
        .order_by("query_id", "rank")
        .values_list("query__external_id", "passage__external_id")
    ):
        ranking.setdefault(query, []).append(passage)
    assert all(len(passages) == len(PASSAGES) for passages in ranking.values())
    expected = hand_metrics(qrels, ranking)
    assert evaluation["queries"] == 2 and evaluation["queries_without_judgments"] == 1
    assert evaluation["metrics"] == pytest.approx(expected)


class TestAPI:
    def url(self, study, query=""):
        return reverse("evaluation:api-study-qrels", args=[study.pk]) + query

    def test_staff_get_plain_text_qrels(self, client, study):
        client.force_login(make_user(staff=True))
        response = client.get(self.url(study, "?aggregate=mean"))
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain")
        assert response_text(response).splitlines() == MEAN
        assert response_text(client.get(self.url(study), HTTP_ACCEPT="text/plain")).splitlines() == MAJORITY

    def test_annotators_are_forbidden(self, client, study):
        client.force_login(make_user())
        assert client.get(self.url(study)).status_code == 403

    def test_anonymous_requests_are_refused(self, client, study):
        assert client.get(self.url(study)).status_code in {401, 403}

    def test_bad_input_is_a_400_naming_the_field(self, client, study):
        client.force_login(make_user(staff=True))
        response = client.get(self.url(study, "?aggregate=mode"), HTTP_ACCEPT="application/json")
        assert response.status_code == 400
        assert "aggregate" in response.json()
        quotability = make_label_study(kind="quotability", items=1)
        response = client.get(self.url(quotability))
        assert response.status_code == 400 and "study" in json.loads(response.content)

    def test_unknown_study_is_404(self, client, db):
        client.force_login(make_user(staff=True))
        assert client.get("/api/studies/999999/qrels/").status_code == 404


@pytest.mark.parametrize("method", ["dawid-skene", "mace", "glad"])
def test_a_competence_model_labels_every_pair_at_once_and_adjudications_still_win(study, method, client):
    """The model sees each annotator's labels of every judged pair (the pairs as tasks); the qrel
    is its label, except where staff adjudicated; the hidden gold item stays out."""
    annotators = list(
        get_user_model()
        .objects.filter(judgments__item__study=study, judgments__item__role=Item.Role.WORK)
        .distinct()
        .order_by("pk")
        .values_list("username", flat=True)
    )
    pairs = sorted(pair for pair, labels in LABELS.items() if labels)
    triples = [
        (annotator, index, label)
        for index, pair in enumerate(pairs)
        for annotator, label in zip(annotators, LABELS[pair])
    ]
    expected = aggregate(triples, method, seed=study.seed, values=[0, 1, 2])
    lines = [
        f"{query} 0 {passage} {2 if (query, passage) == ('qB', 'd5') else expected.labels[index]}"
        for index, (query, passage) in enumerate(pairs)
    ]
    export = relevance_qrels(study, method)
    assert export.lines() == lines
    assert export.summary()["adjudicated"] == 1 and export.summary()["ties"] == 0
    out = io.StringIO()
    call_command("export_qrels", study.pk, "--aggregate", method, stdout=out)
    assert out.getvalue().splitlines() == lines
    client.force_login(make_user(staff=True))
    response = client.get(reverse("evaluation:api-study-qrels", args=[study.pk]) + f"?aggregate={method}")
    assert response.status_code == 200 and response_text(response).splitlines() == lines


def test_a_competence_model_is_refused_for_a_judges_samples_alone(study):
    with pytest.raises(InputError, match="field 'aggregate': glad weighs annotators"):
        relevance_qrels(study, "glad", "judge", judge=object())
