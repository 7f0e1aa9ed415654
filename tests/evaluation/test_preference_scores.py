"""A preference study's scores against independent implementations on the same answers:
Bradley-Terry and Plackett-Luce against choix called here (ties as half a win each, "both bad"
left out), Elo against a replay written here, compatibility against its definition written here
and ir-measures' Compat, Kendall's tau against scipy; and the human ranking as preference qrels
and as a run that run pages and compare_runs read like any other."""

from __future__ import annotations

import itertools
import math
import random

import choix
import ir_measures
import numpy as np
import pytest
from scipy.stats import kendalltau

from annotation.models import Judgment
from annotation.services import create_preference_study, import_judgments
from evaluation.compatibility import compare_with_preferences, compatibility
from evaluation.preference_scores import ELO_K, preference_answers, preference_qrels, preference_scores, save_human_run
from retrieval.metrics import evaluate_run
from retrieval.models import Collection, Retriever, Run
from tests.factories import (
    call_json_command,
    make_annotator,
    make_preference_study,
    make_scored_run,
    write_jsonl,
)

pytestmark = pytest.mark.django_db
ALPHA = 0.05


def simulate(study, annotators, utility, *, tie_below=0.0, both_bad_share=0.0, seed=0) -> list[dict]:
    """Import rows for every item and annotator: each prefers with Bradley-Terry probability from
    the passages' true utilities; utilities closer than `tie_below` are called a tie; a share of
    answers is "both bad"."""
    rng = random.Random(seed)
    rows = []
    for item in study.items.prefetch_related("candidates__passage").order_by("position"):
        shown = [c.passage.external_id for c in sorted(item.candidates.all(), key=lambda c: c.position)]
        for annotator in annotators:
            if rng.random() < both_bad_share:
                rows.append({"item": item.pk, "annotator": annotator, "preferred": "both_bad"})
                continue
            if len(shown) > 2:
                noisy = sorted(shown, key=lambda p: -(utility[p] + rng.gauss(0, 1)))
                rows.append({"item": item.pk, "annotator": annotator, "ranking": noisy})
                continue
            a, b = shown
            if abs(utility[a] - utility[b]) < tie_below:
                rows.append({"item": item.pk, "annotator": annotator, "preferred": "tie"})
                continue
            first_wins = rng.random() < 1 / (1 + math.exp(utility[b] - utility[a]))
            rows.append({"item": item.pk, "annotator": annotator, "preferred": a if first_wins else b})
    return rows


def comparisons(study, query_external_id: str) -> tuple[list[str], list[tuple[str, str]], list[tuple[str, str]]]:
    """From the stored judgments of one query, independently of the platform's reading: the
    passages compared, the strict (winner, loser) pairs and the tied pairs."""
    wins, ties = [], []
    judgments = Judgment.objects.filter(item__study=study, item__query__external_id=query_external_id)
    for judgment in judgments.select_related("item"):
        label = judgment.label
        if label.get("both_bad"):
            continue
        shown = [c.passage.external_id for c in judgment.item.candidates.order_by("position")]
        groups = label["order"]
        for upper, lower in itertools.combinations(groups, 2):
            wins += [(shown[a], shown[b]) for a in upper for b in lower]
        for group in groups:
            ties += [(shown[a], shown[b]) for a, b in itertools.combinations(group, 2)]
    passages = sorted({p for pair in wins + ties for p in pair})
    return passages, wins, ties


@pytest.fixture
def birco_study(shared_data):
    """BIRCO RELiC dev: 4 queries, 60 random pairs of each query's own pool, 3 simulated
    annotators whose utilities come from the qrels (the relevant passage 2 above the others)
    plus a fixed seeded spread."""
    call_json_command("import_beir", shared_data / "birco-relic-dev", "--collection", "birco-relic-dev")
    collection = Collection.objects.get(name="birco-relic-dev")
    study = create_preference_study(
        name="birco preferences",
        collection=collection,
        use_pools=True,
        n_queries=4,
        design="random",
        budget=60,
        seed=5,
    ).study
    relevant = collection.passages.filter(qrels__relevance__gt=0).values_list("external_id", "qrels__relevance")
    relevance = dict(relevant)
    rng = random.Random(17)
    passages = collection.passages.values_list("external_id", flat=True)
    return study, {passage: 2.0 * relevance.get(passage, 0) + rng.gauss(0, 1) for passage in passages}


def test_bradley_terry_scores_equal_choix_on_simulated_birco_preferences(birco_study, tmp_path):
    study, utility = birco_study
    write_jsonl(tmp_path / "answers.jsonl", simulate(study, ["ann", "ben", "cat"], utility))
    import_judgments(study, tmp_path / "answers.jsonl")
    report = preference_scores(study, alpha=ALPHA, resamples=0)
    assert report["model"] == "bradley-terry" and len(report["queries"]) == 4
    for query, section in report["queries"].items():
        passages, wins, ties = comparisons(study, query)
        assert ties == []
        index = {passage: position for position, passage in enumerate(passages)}
        expected = choix.ilsr_pairwise(
            len(passages), [(index[winner], index[loser]) for winner, loser in wins], alpha=ALPHA
        )
        got = np.array([section["scores"][passage] for passage in passages])
        assert np.max(np.abs(got - expected)) < 1e-6
        assert abs(sum(section["scores"].values())) < 1e-9
        assert section["ranking"] == sorted(passages, key=lambda p: -section["scores"][p])


def test_a_tie_counts_half_a_win_to_each_side_and_both_bad_is_left_out(tmp_path):
    study = make_preference_study(n_queries=1, n_passages=5, design="all-pairs", judgments_per_item=3)
    utility = {f"d{i}": -0.6 * i for i in range(5)}
    rows = simulate(study, ["ann", "ben", "cat"], utility, tie_below=0.7, both_bad_share=0.15, seed=3)
    assert {"tie", "both_bad"} <= {row.get("preferred") for row in rows}
    write_jsonl(tmp_path / "answers.jsonl", rows)
    import_judgments(study, tmp_path / "answers.jsonl")
    section = preference_scores(study, alpha=ALPHA, resamples=0)["queries"]["q0"]
    passages, wins, ties = comparisons(study, "q0")
    index = {passage: position for position, passage in enumerate(passages)}
    # Half a win each: every strict answer twice, a tie once each way; the pseudo-count doubles with the data.
    doubled = [(index[winner], index[loser]) for winner, loser in wins] * 2
    doubled += [(index[a], index[b]) for a, b in ties] + [(index[b], index[a]) for a, b in ties]
    expected = choix.ilsr_pairwise(len(passages), doubled, alpha=2 * ALPHA)
    got = np.array([section["scores"][passage] for passage in passages])
    assert np.max(np.abs(got - expected)) < 1e-6
    # Left out, a tie would give another fit: the choice matters and is the documented one.
    strict_only = choix.ilsr_pairwise(
        len(passages), [(index[winner], index[loser]) for winner, loser in wins], alpha=ALPHA
    )
    assert np.max(np.abs(strict_only - expected)) > 1e-3


def test_plackett_luce_scores_of_lists_equal_choix_rankings(tmp_path):
    study = make_preference_study(
        n_queries=1,
        n_passages=7,
        design="random",
        budget=30,
        judgments_per_item=2,
        label_schema={"shape": "listwise", "list_size": 4, "ties": False},
    )
    utility = {f"d{i}": -0.5 * i for i in range(7)}
    write_jsonl(tmp_path / "answers.jsonl", simulate(study, ["ann", "ben"], utility, seed=9))
    import_judgments(study, tmp_path / "answers.jsonl")
    report = preference_scores(study, alpha=ALPHA, resamples=0)
    assert report["model"] == "plackett-luce"
    section = report["queries"]["q0"]
    passages = sorted(section["scores"])
    index = {passage: position for position, passage in enumerate(passages)}
    rankings = []
    for judgment in Judgment.objects.filter(item__study=study).select_related("item"):
        shown = [c.passage.external_id for c in judgment.item.candidates.order_by("position")]
        rankings.append([index[shown[group[0]]] for group in judgment.label["order"]])
    expected = choix.ilsr_rankings(len(passages), rankings, alpha=ALPHA)
    got = np.array([section["scores"][passage] for passage in passages])
    assert np.max(np.abs(got - expected)) < 1e-6


def test_elo_replays_the_answers_in_the_order_given(tmp_path):
    study = make_preference_study(n_queries=1, n_passages=4, design="all-pairs", judgments_per_item=2)
    utility = {f"d{i}": -1.0 * i for i in range(4)}
    write_jsonl(tmp_path / "answers.jsonl", simulate(study, ["ann", "ben"], utility, tie_below=0.5, seed=2))
    import_judgments(study, tmp_path / "answers.jsonl")
    section = preference_scores(study, model="elo", resamples=0)["queries"]["q0"]
    ratings = dict.fromkeys(section["scores"], 1000.0)
    for judgment in Judgment.objects.filter(item__study=study).order_by("submitted_at", "pk").select_related("item"):
        shown = [c.passage.external_id for c in judgment.item.candidates.order_by("position")]
        order = judgment.label["order"]
        a, b = shown
        outcome = 0.5 if len(order) == 1 else float(order[0] == [0])
        expected = 1 / (1 + 10 ** ((ratings[b] - ratings[a]) / 400))
        ratings[a] += ELO_K * (outcome - expected)
        ratings[b] -= ELO_K * (outcome - expected)
    mean = sum(ratings.values()) / len(ratings)
    for passage, rating in ratings.items():
        assert section["scores"][passage] == pytest.approx((rating - mean) * math.log(10) / 400, abs=1e-9)


def test_bootstrap_intervals_are_seeded_and_hold_the_estimate(tmp_path):
    study = make_preference_study(n_queries=1, n_passages=5, design="all-pairs", judgments_per_item=3)
    utility = {f"d{i}": -0.8 * i for i in range(5)}
    write_jsonl(tmp_path / "answers.jsonl", simulate(study, ["ann", "ben", "cat"], utility, seed=4))
    import_judgments(study, tmp_path / "answers.jsonl")
    first = preference_scores(study, resamples=100, seed=1)["queries"]["q0"]
    again = preference_scores(study, resamples=100, seed=1)["queries"]["q0"]
    assert first["intervals"] == again["intervals"]
    for passage, (low, high) in first["intervals"].items():
        assert low <= first["scores"][passage] <= high and low < high


# --- compatibility and Kendall's tau ------------------------------------------------------------


def compatibility_by_definition(run: list[str], grades: dict[str, float], p: float, depth: int) -> float:
    """Clarke et al. 2020, written out: the ideal ranking (grade > 0, highest first, equal grades in
    the run's order, unretrieved after them by id), RBO truncated at depth, normalised by the
    ideal's RBO with itself."""
    position = {doc: rank for rank, doc in enumerate(run)}
    ideal = sorted(
        (doc for doc, grade in grades.items() if grade > 0),
        key=lambda doc: (-grades[doc], position.get(doc, len(run)), doc),
    )

    def rbo(a, b):
        weights = [p**d for d in range(depth)]
        overlaps = [len(set(a[: d + 1]) & set(b[: d + 1])) / (d + 1) for d in range(depth)]
        return sum(w * o for w, o in zip(weights, overlaps, strict=True)) / sum(weights)

    return rbo(run, ideal) / rbo(ideal, ideal)


@pytest.mark.parametrize("depth", [1, 3, 10, 1000])
@pytest.mark.parametrize("p", [0.5, 0.95])
def test_compatibility_equals_its_definition_at_any_depth(p, depth):
    rng = random.Random(depth)
    for _ in range(20):
        docs = [f"d{i}" for i in range(12)]
        grades = {doc: rng.choice([0, 0, 1, 2, 3, 5]) for doc in docs}
        run = rng.sample([*docs, "x1", "x2"], rng.randint(0, 14))
        if not any(grade > 0 for grade in grades.values()):
            assert compatibility(run, grades, p, depth) is None
            continue
        assert compatibility(run, grades, p, depth) == pytest.approx(
            compatibility_by_definition(run, grades, p, depth), abs=1e-12
        )


def test_compatibility_agrees_with_ir_measures_compat():
    rng = random.Random(0)
    qrels, runs, ours = [], [], {}
    for query in range(15):
        docs = [f"d{i}" for i in range(10)]
        grades = {doc: rng.choice([0, 1, 2, 3, 4]) for doc in docs}
        grades["d0"] = 5
        ranked = rng.sample(docs, 8)
        qrels += [ir_measures.Qrel(f"q{query}", doc, grade) for doc, grade in grades.items()]
        runs += [ir_measures.ScoredDoc(f"q{query}", doc, float(8 - rank)) for rank, doc in enumerate(ranked)]
        ours[f"q{query}"] = compatibility(ranked, grades, 0.8, max(len(ranked), sum(g > 0 for g in grades.values())))
    for metric in ir_measures.iter_calc([ir_measures.Compat(p=0.8)], qrels, runs):
        assert ours[metric.query_id] == pytest.approx(metric.value, abs=1e-12)


def test_runs_are_compared_with_the_human_ranking_by_compatibility_and_kendall_tau(tmp_path):
    study = make_preference_study(n_queries=2, n_passages=6, design="all-pairs", judgments_per_item=3)
    utility = {f"d{i}": -0.7 * i for i in range(6)}
    write_jsonl(tmp_path / "answers.jsonl", simulate(study, ["ann", "ben", "cat"], utility, seed=6))
    import_judgments(study, tmp_path / "answers.jsonl")
    collection = study.collection
    reversed_run = make_scored_run(collection, {q: {f"d{i}": float(i) for i in range(6)} for q in ("q0", "q1")})
    comparison = compare_with_preferences(study, [reversed_run], persistence=0.9, depth=4)
    scores = preference_scores(study, resamples=0)
    entry = comparison["runs"][str(reversed_run.pk)]
    for query, section in scores["queries"].items():
        system = {f"d{i}": float(i) for i in range(6)}
        passages = sorted(section["scores"])
        tau = kendalltau([section["scores"][p] for p in passages], [system[p] for p in passages]).statistic
        assert entry["per_query"][query]["kendall_tau"] == pytest.approx(tau)
        grades = dict(preference_qrels({"queries": {query: section}})[i][1:] for i in range(len(section["ranking"])))
        run = [f"d{i}" for i in reversed(range(6))]
        assert entry["per_query"][query]["compatibility"] == pytest.approx(
            compatibility_by_definition(run, grades, 0.9, 4)
        )
    assert entry["kendall_tau"] < 0 and comparison["p"] == 0.9 and comparison["depth"] == 4


def test_the_human_ranking_is_a_run_that_evaluate_run_and_compare_runs_read(tmp_path):
    study = make_preference_study(n_queries=2, n_passages=5, design="all-pairs", judgments_per_item=3)
    utility = {f"d{i}": -1.0 * i for i in range(5)}
    write_jsonl(tmp_path / "answers.jsonl", simulate(study, ["ann", "ben", "cat"], utility, seed=8))
    import_judgments(study, tmp_path / "answers.jsonl")
    report = preference_scores(study, resamples=0)
    run = save_human_run(study, report)
    assert run.retriever.kind == Retriever.Kind.HUMAN and run.status == Run.Status.DONE
    for query, section in report["queries"].items():
        ranked = list(
            run.hits.filter(query__external_id=query).order_by("rank").values_list("passage__external_id", flat=True)
        )
        assert ranked == section["ranking"]
    assert evaluate_run(run)["queries"] == 2
    other = save_human_run(study, preference_scores(study, model="elo", resamples=0), "arena ranking")
    comparison = call_json_command("compare_runs", str(run.pk), str(other.pk))
    assert set(comparison["runs"]) == {str(run.pk), str(other.pk)}


def test_preference_qrels_grade_by_place_and_give_both_bad_passages_zero():
    section = {
        "ranking": ["a", "b", "c", "d"],
        "scores": {"a": 1.0, "b": 0.2, "c": 0.2, "d": -1.4},
        "both_bad": {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.75},
    }
    assert preference_qrels({"queries": {"q": section}}) == [("q", "a", 4), ("q", "b", 3), ("q", "c", 3), ("q", "d", 0)]


def test_preference_scores_command_prints_the_contracted_keys(tmp_path):
    study = make_preference_study(n_queries=1, n_passages=4, design="all-pairs", judgments_per_item=1)
    annotator = make_annotator("ann")
    rows = simulate(study, [annotator.username], {f"d{i}": -1.0 * i for i in range(4)}, seed=1)
    write_jsonl(tmp_path / "answers.jsonl", rows)
    import_judgments(study, tmp_path / "answers.jsonl")
    summary = call_json_command("preference_scores", str(study.pk), "--intervals", "50")
    section = summary["queries"]["q0"]
    assert set(section["scores"]) == set(section["ranking"]) == {"d0", "d1", "d2", "d3"}
    assert abs(sum(section["scores"].values())) < 1e-9
    assert section["ranking"] == sorted(section["scores"], key=lambda p: -section["scores"][p])
    assert len(preference_answers(study)) == 6
