"""compare_runs: runs on their common queries with standard errors, paired t-tests (scipy's),
sign-flip permutation tests (exact for small n; a hand-worked case) and Holm's correction
(statsmodels')."""

import numpy as np
import pytest
from django.core.management import CommandError
from scipy import stats
from statsmodels.stats.multitest import multipletests

from evaluation.comparison import holm, paired_t_pvalue, permutation_pvalue
from retrieval.services.external_runs import save_ranked_run
from tests.factories import (
    add_qrels,
    api_client,
    call_json_command,
    make_annotator,
    make_collection,
    make_passages,
    make_query,
    make_user,
)


def test_paired_t_test_matches_scipy():
    generator = np.random.default_rng(7)
    for n in (3, 10, 50):
        a, b = generator.random(n), generator.random(n)
        assert paired_t_pvalue(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue, abs=1e-12)


def test_identical_runs_have_p_one():
    assert paired_t_pvalue([0.5, 0.2], [0.5, 0.2]) == 1.0 and permutation_pvalue([1, 0], [1, 0]) == 1.0


def test_permutation_test_hand_worked_case():
    # Differences 1, 2, 3 (mean 2): of the 8 sign patterns only +++ and --- reach |mean| >= 2.
    assert permutation_pvalue([1, 2, 3], [0, 0, 0]) == 0.25
    # Differences 1, -1, 2, 2: |sums| over the 16 patterns; |sum| >= 4 for ++++-like patterns only.
    differences = np.array([1.0, -1.0, 2.0, 2.0])
    patterns = np.array(np.meshgrid(*[[1, -1]] * 4)).reshape(4, -1).T
    expected = np.mean(np.abs(patterns @ differences) >= abs(differences.sum()))
    assert permutation_pvalue(differences, np.zeros(4)) == expected == 0.375


def test_sampled_permutation_test_is_seeded_and_near_the_t_test():
    generator = np.random.default_rng(1)
    a = generator.random(40)
    b = a - 0.05 + 0.2 * generator.standard_normal(40)
    first = permutation_pvalue(a, b, permutations=4000, seed=3)
    assert first == permutation_pvalue(a, b, permutations=4000, seed=3)
    assert first == pytest.approx(paired_t_pvalue(a, b), abs=0.05)


def test_holm_matches_statsmodels():
    pvalues = [0.01, 0.04, 0.03, 0.2, 0.005]
    assert holm(pvalues) == pytest.approx(list(multipletests(pvalues, method="holm")[1]), abs=1e-12)


@pytest.fixture
def three_runs(db):
    collection = make_collection("compare")
    passages = make_passages(collection, 5)
    queries = [make_query(collection, f"q{i}") for i in range(6)]
    for index, query in enumerate(queries[:5]):
        add_qrels(query, {passages[index]: 1})
    generator = np.random.default_rng(0)
    runs = []
    for name in ("alpha", "beta", "gamma"):
        rankings = {query: [(passage, float(generator.random())) for passage in passages] for query in queries}
        runs.append(save_ranked_run(collection, name=name, retriever=name, rankings=rankings))
    return runs


def test_compare_runs_reports_every_run_and_every_pair(three_runs):
    ids = [run.pk for run in three_runs]
    report = call_json_command("compare_runs", *ids, "--metrics", "nDCG@10 R@1 MAP")
    assert set(report["runs"]) == {str(run_id) for run_id in ids}
    for run in three_runs:
        block = report["runs"][str(run.pk)]
        evaluated = call_json_command("evaluate_run", run.pk, "--metrics", "nDCG@10 R@1 MAP")
        assert block["metrics"] == pytest.approx(evaluated["metrics"]) and block["stderr"] == pytest.approx(
            evaluated["stderr"]
        )
    assert report["queries"] == 5
    assert len(report["tests"]) == 3 * 3
    assert set(report["tests"][0]) == {
        "a",
        "b",
        "metric",
        "difference",
        "t_pvalue",
        "permutation_pvalue",
        "holm_pvalue",
    }
    for metric in ("ndcg@10", "recall@1", "map"):
        rows = [row for row in report["tests"] if row["metric"] == metric]
        assert [row["holm_pvalue"] for row in rows] == pytest.approx(
            list(multipletests([row["permutation_pvalue"] for row in rows], method="holm")[1])
        )


def test_bad_comparisons_are_refused(three_runs):
    with pytest.raises(CommandError, match="field 'runs': compare at least two runs"):
        call_json_command("compare_runs", three_runs[0].pk)
    with pytest.raises(CommandError, match="field 'runs': no run with id '999999'"):
        call_json_command("compare_runs", three_runs[0].pk, 999999)
    other = make_collection()
    make_passages(other, 1)
    stray = save_ranked_run(other, name="x", retriever="x", rankings={make_query(other): []})
    with pytest.raises(CommandError, match="different collections"):
        call_json_command("compare_runs", three_runs[0].pk, stray.pk)


def test_comparisons_over_rest_are_staff_only(three_runs):
    url = f"/api/comparisons/?runs={three_runs[0].pk},{three_runs[1].pk}&metrics=MAP"
    response = api_client(make_user(staff=True)).get(url)
    assert response.status_code == 200 and [row["metric"] for row in response.json()["tests"]] == ["map"]
    assert api_client(make_user(staff=True)).get("/api/comparisons/?runs=1").status_code == 400
    for user in (None, make_annotator(), make_user()):
        assert api_client(user).get(url).status_code in (401, 403)


def test_the_comparison_page_renders_tables_and_plots_for_staff_only(three_runs, client):
    ids = ",".join(str(run.pk) for run in three_runs)
    url = f"/runs/compare/?runs={ids}&metrics=nDCG@10 MAP&metric=map"
    client.force_login(make_user(staff=True))
    page = client.get(url).content.decode()
    assert page.count('class="run-interval"') == 3 and page.count('class="difference"') == 3 * 5
    assert "map with 95% intervals" in page
    assert client.get("/runs/compare/?runs=1").status_code == 400
    client.force_login(make_annotator())
    assert client.get(url).status_code == 403
    client.logout()
    assert client.get(url).status_code == 302


def test_comparisons_take_a_qrels_source(three_runs):
    ids = [run.pk for run in three_runs]
    report = call_json_command("compare_runs", *ids, "--metrics", "MAP", "--qrels", "imported")
    assert report["qrels"] == "imported" and report["queries"] == 5
    with pytest.raises(CommandError, match="field 'qrels': no study with id 999999"):
        call_json_command("compare_runs", *ids, "--qrels", "study:999999")
    url = f"/api/comparisons/?runs={ids[0]},{ids[1]}&qrels=judge:nobody"
    assert api_client(make_user(staff=True)).get(url).json() == {"qrels": ["no judge named 'nobody'"]}
