"""Leaderboards: runs of a collection ranked under one qrels source, each figure equal to
ir-measures on the same qrels and run files (per query and mean), Judged@k beside every metric,
compare_runs' paired tests, leave-one-run-out equal to a direct recomputation (scipy's Kendall
tau), CSV and LaTeX exports, and the command, REST and page contracts with their refusals."""

import csv
import io

import ir_measures
import pytest
from django.core.management import CommandError, call_command
from scipy import stats

from evaluation.leaderboard import leaderboard
from evaluation.leaderboard_exports import significance_marks
from retrieval.services.external_runs import save_ranked_run
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

QRELS = {
    "q0": {"d0": 2, "d1": 0, "d2": 1, "d5": 0},
    "q1": {"d1": 1, "d3": 0, "d4": 0},
    "q2": {"d2": 0, "d6": 0},  # judged, nothing relevant: scores 0
    "q3": {"d7": 1, "d0": 0, "d8": 1},
    "q4": {"d9": 1, "d3": 0},
    # q5 has no judgment at all: left out
}
RANKINGS = {
    "alpha_run & co": {
        "q0": ["d2", "d0", "d5", "d9", "d1"],
        "q1": ["d1", "d3", "d8"],
        "q2": ["d6", "d2"],
        "q3": ["d8", "d7", "d0"],
        "q4": ["d3", "d9"],
        "q5": ["d1"],
    },
    "beta": {
        "q0": ["d0", "d1", "d2"],
        "q1": ["d4", "d3", "d1"],
        "q2": ["d2"],
        "q3": ["d0", "d4", "d7", "d6", "d8"],
        "q4": ["d9"],
        "q5": ["d2"],
    },
    "gamma": {  # leaves q4 out; ranks unjudged passages high
        "q0": ["d7", "d8", "d0", "d2"],
        "q1": ["d6", "d7", "d1"],
        "q2": ["d9"],
        "q3": ["d5", "d7", "d8", "d0"],
        "q5": ["d9"],
    },
}
METRICS = "nDCG@10 P@5 Bpref Judged@10 AP ndcg_cut_3 nDCG(judged_only=True)@5"
REFERENCE = {name: ir_measures.parse_measure(name) for name in METRICS.split() if "_" not in name}
REFERENCE["ndcg_cut_3"] = ir_measures.parse_trec_measure("ndcg_cut_3")[0]


@pytest.fixture
def board_data():
    collection = make_collection("hand board")
    passages = {p.external_id: p for p in make_text_passages(collection, [f"text {i}" for i in range(10)])}
    queries = {f"q{i}": make_text_query(collection, f"query {i}", f"q{i}") for i in range(6)}
    for query, judged in QRELS.items():
        add_qrels(queries[query], {passages[d]: r for d, r in judged.items()})
    runs = {}
    for name, ranking in RANKINGS.items():
        scored = {
            queries[q]: [(passages[d], 10.0 - rank) for rank, d in enumerate(docs)] for q, docs in ranking.items()
        }
        runs[name] = save_ranked_run(collection, name=name, retriever=name, rankings=scored)
    return collection, runs


def reference_values(qrels: dict, ranking: dict) -> dict:
    """(query, metric name) -> ir-measures' value on these qrels and this run (untied scores)."""
    reference_qrels = [ir_measures.Qrel(q, d, r) for q, judged in qrels.items() for d, r in judged.items()]
    run = [ir_measures.ScoredDoc(q, d, 10.0 - rank) for q, docs in ranking.items() for rank, d in enumerate(docs)]
    names = {measure: name for name, measure in REFERENCE.items()}
    return {
        (m.query_id, names[m.measure]): m.value
        for m in ir_measures.iter_calc(list(REFERENCE.values()), reference_qrels, run)
    }


def test_every_value_is_ir_measures_on_the_same_qrels_and_run_files(board_data):
    collection, runs = board_data
    ids = ",".join(str(run.pk) for run in runs.values())
    board = call_json_command("leaderboard", collection.name, "--runs", ids, "--metrics", METRICS, "--per-query")

    assert board["metrics"] == METRICS.split() and board["queries"] == 5 and board["qrels"] == "imported"
    assert board["judged_at"] == {
        "nDCG@10": "10",
        "P@5": "5",
        "Bpref": "all",
        "Judged@10": "10",
        "AP": "all",
        "ndcg_cut_3": "3",
        "nDCG(judged_only=True)@5": "5",
    }
    for name, run in runs.items():
        entry = board["runs"][str(run.pk)]
        assert entry["name"] == name and set(entry["judged"]) == {"3", "5", "10", "all"}
        expected = reference_values(QRELS, RANKINGS[name])
        per_query = board["per_query"][str(run.pk)]
        for metric in REFERENCE:
            values = [expected[query, metric] for query in QRELS]  # ir-measures fills a missing query with 0
            assert entry["metrics"][metric] == pytest.approx(sum(values) / len(values), abs=1e-12), (name, metric)
            assert per_query["metrics"][metric] == pytest.approx(dict(zip(QRELS, values))), (name, metric)
        judged_10 = [expected[query, "Judged@10"] for query in QRELS]
        assert entry["judged"]["10"] == pytest.approx(sum(judged_10) / 5) == entry["metrics"]["Judged@10"]
        assert per_query["judged"]["10"] == pytest.approx(dict(zip(QRELS, judged_10)))
    gamma = board["runs"][str(runs["gamma"].pk)]
    assert gamma["judged"]["10"] < 1 and gamma["coverage_warning"].startswith("Judged@")


def test_ranking_and_tests_follow_the_means(board_data):
    collection, runs = board_data
    board = leaderboard(collection, [run.pk for run in runs.values()], metrics="nDCG@10 P@5")
    for metric in ("nDCG@10", "P@5"):
        means = [board["runs"][run_id]["metrics"][metric] for run_id in board["ranking"][metric]]
        assert means == sorted(means, reverse=True)
    assert len(board["tests"]) == 2 * 3
    comparison = call_json_command("compare_runs", *[run.pk for run in runs.values()], "--metrics", "nDCG@10 P@5")
    for ours, theirs in zip(board["tests"], comparison["tests"], strict=True):
        assert ours["permutation_pvalue"] == theirs["permutation_pvalue"]
        assert ours["t_pvalue"] == pytest.approx(theirs["t_pvalue"]) and ours["a"] == theirs["a"]


def unique_pairs(depth: int) -> dict[str, set]:
    """Per run, the judged pairs in its top `depth` and in no other run's, worked out directly."""
    tops = {name: {q: set(docs[:depth]) for q, docs in ranking.items()} for name, ranking in RANKINGS.items()}
    pairs = {}
    for name in RANKINGS:
        pairs[name] = {
            (q, d)
            for q, docs in tops[name].items()
            for d in docs
            if d in QRELS.get(q, {}) and not any(d in tops[other].get(q, ()) for other in RANKINGS if other != name)
        }
    return pairs


def test_leave_one_run_out_equals_a_direct_recomputation(board_data):
    collection, runs = board_data
    ids = ",".join(str(run.pk) for run in runs.values())
    board = call_json_command(
        "leaderboard", collection.name, "--runs", ids, "--metrics", "nDCG@10 P@5 Bpref", "--leave-one-out", "2"
    )
    full = {name: board["runs"][str(run.pk)]["metrics"] for name, run in runs.items()}
    direct = {}
    for name, pairs in unique_pairs(2).items():
        reduced = {q: {d: r for d, r in judged.items() if (q, d) not in pairs} for q, judged in QRELS.items()}
        expected = reference_values(reduced, RANKINGS[name])
        # The query set stays the full one: a query whose pairs all went scores 0.
        direct[name] = {
            m: sum(expected.get((q, m), 0.0) for q in QRELS) / len(QRELS) for m in ("nDCG@10", "P@5", "Bpref")
        }
        entry = board["leave_one_out"][str(runs[name].pk)]
        assert entry["removed_pairs"] == len(pairs) and entry["metrics"] == pytest.approx(direct[name])
    assert sum(len(pairs) for pairs in unique_pairs(2).values()) > 0
    for metric in ("nDCG@10", "P@5", "Bpref"):
        for name, run in runs.items():
            others = {other: full[other][metric] for other in runs if other != name}
            place_full = 1 + sum(value > full[name][metric] for value in others.values())
            place_out = 1 + sum(value > direct[name][metric] for value in others.values())
            ties_before = [o for o in runs if o != name and list(runs).index(o) < list(runs).index(name)]
            place_full += sum(others[o] == full[name][metric] for o in ties_before)
            place_out += sum(others[o] == direct[name][metric] for o in ties_before)
            assert board["leave_one_out"][str(run.pk)]["rank_change"][metric] == place_out - place_full, (name, metric)
        tau = stats.kendalltau([full[name][metric] for name in runs], [direct[name][metric] for name in runs]).statistic
        assert board["kendall_tau"][metric] == (None if tau != tau else pytest.approx(tau))
    assert board["pool_depth"] == 2


def test_csv_and_latex_exports_hold_the_table(board_data):
    collection, runs = board_data
    ids = ",".join(str(run.pk) for run in runs.values())
    board = leaderboard(collection, [run.pk for run in runs.values()], metrics="nDCG@10 Bpref", leave_one_out=3)
    text = call_command_text(
        "leaderboard",
        collection.name,
        "--runs",
        ids,
        "--metrics",
        "nDCG@10 Bpref",
        "--leave-one-out",
        "3",
        "--format",
        "csv",
    )
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:6] == ["rank", "run", "name", "nDCG@10", "nDCG@10 stderr", "Judged@10 (nDCG@10)"]
    assert [int(row[1]) for row in rows[1:]] == board["ranking"]["nDCG@10"]
    for row in rows[1:]:
        entry = board["runs"][int(row[1])]
        assert float(row[3]) == entry["metrics"]["nDCG@10"] and float(row[5]) == entry["judged"]["10"]
        assert float(row[6]) == board["leave_one_out"][int(row[1])]["metrics"]["nDCG@10"]
        assert int(row[7]) == board["leave_one_out"][int(row[1])]["rank_change"]["nDCG@10"]
    latex = call_command_text(
        "leaderboard", collection.name, "--runs", ids, "--metrics", "nDCG@10 Bpref", "--format", "latex"
    )
    assert latex.startswith(r"\begin{table}") and r"\toprule" in latex and r"\bottomrule" in latex
    assert r"alpha\_run \& co" in latex and "alpha_run" not in latex
    assert r"\textbf{" in latex and "Judged@10 & Judged@all" in latex


def call_command_text(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_significance_marks_name_the_runs_beaten():
    board = {
        "runs": {7: {}, 8: {}, 9: {}},
        "metrics": ["P@5"],
        "significance": 0.05,
        "tests": [
            {"a": 7, "b": 8, "metric": "P@5", "difference": 0.2, "holm_pvalue": 0.01},
            {"a": 7, "b": 9, "metric": "P@5", "difference": -0.1, "holm_pvalue": 0.04},
            {"a": 8, "b": 9, "metric": "P@5", "difference": -0.3, "holm_pvalue": 0.2},
        ],
    }
    assert significance_marks(board) == {"P@5": {7: ["b"], 8: [], 9: ["a"]}}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--metrics", "mean_rank"], "field 'metrics': 'mean_rank' reads ranks past the stored hits"),
        (["--metrics", "nDCG"], None),
        (["--leave-one-out", "0"], "field 'leave_one_out': the pool depth must be a whole number"),
        (["--leave-one-out", "ten"], "field 'leave_one_out'"),
        (["--qrels", "study:999999"], "field 'qrels': no study with id 999999"),
        (["--qrels", "judge:"], "field 'qrels': unknown qrels source 'judge:'"),
        (["--qrels", "judge:nobody"], "field 'qrels': no judge named 'nobody'"),
        (["--qrels", "pool"], "field 'qrels': unknown qrels source 'pool'"),
        (["--coverage-threshold", "1.5"], "field 'coverage_threshold'"),
    ],
)
def test_bad_options_are_one_line_errors(board_data, options, message):
    collection, runs = board_data
    ids = ",".join(str(run.pk) for run in runs.values())
    if message is None:
        assert call_json_command("leaderboard", collection.name, "--runs", ids, *options)["metrics"] == ["nDCG"]
        return
    with pytest.raises(CommandError) as error:
        call_json_command("leaderboard", collection.name, "--runs", ids, *options)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_runs_must_be_two_finished_runs_of_the_collection(board_data):
    collection, runs = board_data
    first = str(runs["beta"].pk)
    with pytest.raises(CommandError, match="field 'runs': compare at least two runs"):
        call_json_command("leaderboard", collection.name, "--runs", first)
    other = make_collection("elsewhere")
    stray = save_ranked_run(
        other, name="x", retriever="x", rankings={make_text_query(other, "q"): make_text_passages(other, ["a"]) and []}
    )
    with pytest.raises(CommandError, match="different collections"):
        call_json_command("leaderboard", collection.name, "--runs", f"{first},{stray.pk}")
    with pytest.raises(CommandError, match="do not rank collection"):
        call_json_command("leaderboard", "elsewhere", "--runs", f"{first},{runs['gamma'].pk}")
    with pytest.raises(CommandError, match="no collection named 'nowhere'"):
        call_json_command("leaderboard", "nowhere", "--runs", f"{first},{runs['gamma'].pk}")


class TestRest:
    def url(self, collection, query=""):
        return f"/api/collections/{collection.pk}/leaderboard/{query}"

    def test_staff_get_the_board_and_its_files(self, board_data):
        collection, runs = board_data
        ids = ",".join(str(run.pk) for run in runs.values())
        client = api_client(make_user(staff=True))
        response = client.get(self.url(collection, f"?runs={ids}&metrics=nDCG@10 P@5&leave_one_out=2"))
        assert response.status_code == 200
        body = response.json()
        assert {"runs", "ranking", "leave_one_out", "kendall_tau"} <= set(body)
        assert set(body["runs"][str(runs["beta"].pk)]) >= {"name", "metrics", "judged"}
        csv_response = client.get(self.url(collection, f"?runs={ids}&export=csv"))
        assert csv_response["Content-Type"].startswith("text/csv")
        assert csv_response["Content-Disposition"] == 'attachment; filename="leaderboard-hand-board.csv"'
        latex = client.get(self.url(collection, f"?runs={ids}&export=latex"))
        assert latex.status_code == 200 and latex.content.decode().startswith(r"\begin{table}")
        assert client.get(self.url(collection, f"?runs={ids}&export=pdf")).json() == {
            "export": ["unknown export 'pdf': use json, csv or latex"]
        }
        assert client.get(self.url(collection, "?runs=1")).status_code == 400

    def test_annotators_and_strangers_are_refused(self, board_data):
        collection, runs = board_data
        ids = ",".join(str(run.pk) for run in runs.values())
        for query in (f"?runs={ids}", f"?runs={ids}&export=csv", f"?runs={ids}&export=latex"):
            for user in (None, make_annotator(), make_user()):
                response = api_client(user).get(self.url(collection, query))
                assert response.status_code in (401, 403) and b"alpha" not in response.content


class TestPage:
    def test_staff_rank_runs_and_download_the_files(self, board_data, staff_client):
        collection, runs = board_data
        base = f"/collections/{collection.pk}/leaderboard/"
        assert 'name="runs"' in staff_client.get(base).content.decode()
        query = "?" + "&".join(f"runs={run.pk}" for run in runs.values()) + "&metrics=nDCG@10 Bpref&leave_one_out=2"
        page = staff_client.get(base + query).content.decode()
        assert 'id="leaderboard-table"' in page and 'id="kendall-tau"' in page and "coverage-warning" in page
        assert f'href="{base}' in page and "export=csv" in page and "export=latex" in page
        download = staff_client.get(base + query + "&export=csv")
        assert download["Content-Type"].startswith("text/csv") and download.content.decode().startswith("rank,run")
        bad = staff_client.get(base + query + "&qrels=pool")
        assert bad.status_code == 400 and "unknown qrels source" in bad.content.decode()

    def test_annotators_and_visitors_are_kept_out(self, board_data, client):
        collection, runs = board_data
        url = f"/collections/{collection.pk}/leaderboard/?runs={runs['beta'].pk}&runs={runs['gamma'].pk}"
        assert client.get(url).status_code == 302
        client.force_login(make_annotator())
        assert client.get(url).status_code == 403
        assert client.get(url + "&export=csv").status_code == 403
