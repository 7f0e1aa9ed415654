"""Leaderboard agreement on real data: BIRCO's RELiC dev split (its first 16 queries with their
judged pools), five runs (BM25 at four k1/b settings and another system's imported run), the
human qrels as imported, and a judge whose labels are those qrels with 25 % of them flipped
(seeded), imported as the judge's labels with import_judge_labels. Every metric value equals
ir-measures on the same qrels and run files over the human queries; Kendall's tau and Spearman's
rho equal scipy's on those values; tau_AP equals an implementation written here from Yilmaz,
Aslam and Robertson's definition; the bootstrap interval equals the same resampling done here;
the label kappa equals scikit-learn's. BM25 on 800 passages takes seconds, no dense model."""

import json
import random

import ir_measures
import numpy as np
import pytest
from django.test import Client
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from retrieval.models import Collection
from retrieval.qrels_sources import load_qrels
from tests.evaluation.test_collections_birco import birco_subset, imported_system, qrels_file, run_file
from tests.factories import (
    add_qrels,
    api_client,
    call_json_command,
    make_annotator,
    make_collection,
    make_scored_run,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = [pytest.mark.django_db, pytest.mark.data]

MEASURES = {name: ir_measures.parse_measure(name) for name in ("nDCG@10", "P@5")}
BM25_SETTINGS = [("0.5", "0.9"), ("1.2", "0.75"), ("0.2", "0.2"), ("3.0", "1.0")]
FLIP_RATE = 0.25


def flipped(lines: list[str], rate: float, seed: int) -> list[str]:
    """The qrels with a seeded share of their labels flipped (relevant <-> not relevant)."""
    generator = random.Random(seed)
    out = []
    for line in lines:
        query, zero, passage, relevance = line.split()
        if generator.random() < rate:
            relevance = "0" if int(relevance) > 0 else "1"
        out.append(f"{query} {zero} {passage} {relevance}")
    return out


@pytest.fixture
def collection_with_runs(shared_data, tmp_path):
    folder = birco_subset(shared_data / "birco-relic-dev", tmp_path / "birco-relic-dev")
    call_json_command("import_beir", folder, "--collection", "birco-relic-dev")
    collection = Collection.objects.get(name="birco-relic-dev")
    runs = [
        call_json_command(
            "retrieve", "--collection", collection.name, "--retriever", "bm25", "--k1", k1, "--b", b, "--depth", "60"
        )["run_id"]
        for k1, b in BM25_SETTINGS
    ]
    runs.append(imported_system(collection, runs[0], tmp_path / "other.trec"))
    return collection, runs


def reference_tau_ap(truth: list[float], estimate: list[float]) -> float:
    """tau_AP (Yilmaz et al. 2008, eq. 3) written from the paper: p' = 1/(N-1) * sum over ranks
    i = 2..N of the estimated list of C(i)/(i-1), C(i) the items above rank i that the true list
    also puts above the item at i; tau_AP = 2p' - 1. Ties broken by position, as the board does."""
    n = len(truth)
    estimated = sorted(range(n), key=lambda index: (-estimate[index], index))
    true_rank = {index: rank for rank, index in enumerate(sorted(range(n), key=lambda i: (-truth[i], i)))}
    total = 0.0
    for i in range(2, n + 1):
        item = estimated[i - 1]
        correct = len([above for above in estimated[: i - 1] if true_rank[above] < true_rank[item]])
        total += correct / (i - 1)
    return 2 * total / (n - 1) - 1


def per_query(qrels: list, run_id: int, queries: list[str]) -> dict[str, list[float]]:
    """ir-measures' per-query values over `queries` (0 for a query the qrels do not judge)."""
    values = {
        (m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(MEASURES.values(), qrels, run_file(run_id))
    }
    return {name: [values.get((query, name), 0.0) for query in queries] for name in MEASURES}


def test_leaderboard_agreement_matches_scipy_ir_measures_and_tau_ap_written_from_the_paper(
    collection_with_runs, tmp_path
):
    collection, runs = collection_with_runs
    human_lines = list(load_qrels(collection).trec_lines())
    judge_lines = flipped(human_lines, FLIP_RATE, seed=7)
    assert sum(a != b for a, b in zip(human_lines, judge_lines)) > 100  # the judge really disagrees
    path = tmp_path / "flipped.qrels"
    path.write_text("\n".join(judge_lines) + "\n")
    imported = call_json_command("import_judge_labels", "flipper", path, "--collection", collection.name)
    assert (imported["judge"], imported["labels"]) == ("flipper", len(judge_lines))

    report = call_json_command(
        "judge_agreement",
        collection.name,
        "--runs",
        ",".join(map(str, runs)),
        "--human",
        "imported",
        "--judge",
        "flipper",
        "--metrics",
        " ".join(MEASURES),
        "--seed",
        "3",
        "--bootstrap",
        "200",
    )

    human_qrels, judge_qrels = qrels_file(human_lines), qrels_file(judge_lines)
    judged = {qrel.query_id for qrel in human_qrels}  # in the collection's order, as the board resamples them
    queries = [
        query
        for query in collection.queries.order_by("ordinal", "pk").values_list("external_id", flat=True)
        if query in judged
    ]
    assert report["queries"] == len(queries) == 16
    human = {run: per_query(human_qrels, run, queries) for run in runs}
    judge = {run: per_query(judge_qrels, run, queries) for run in runs}
    for name in MEASURES:
        section = report["metrics"][name]
        human_means = [float(np.mean(human[run][name])) for run in runs]
        judge_means = [float(np.mean(judge[run][name])) for run in runs]
        assert [section["human"][str(run)] for run in runs] == pytest.approx(human_means, abs=1e-12)
        assert [section["judge"][str(run)] for run in runs] == pytest.approx(judge_means, abs=1e-12)
        assert section["kendall_tau"] == pytest.approx(stats.kendalltau(human_means, judge_means).statistic)
        assert section["spearman"] == pytest.approx(stats.spearmanr(human_means, judge_means).statistic)
        assert section["tau_ap"] == pytest.approx(reference_tau_ap(human_means, judge_means))
        both = (reference_tau_ap(human_means, judge_means) + reference_tau_ap(judge_means, human_means)) / 2
        assert section["tau_ap_symmetric"] == pytest.approx(both)

        # The interval: the same resampling of queries, done here on ir-measures' values.
        generator = np.random.default_rng(3)
        taus = []
        human_matrix = np.array([human[run][name] for run in runs])
        judge_matrix = np.array([judge[run][name] for run in runs])
        for _ in range(200):
            pick = generator.integers(0, len(queries), size=len(queries))
            tau = stats.kendalltau(human_matrix[:, pick].mean(1), judge_matrix[:, pick].mean(1)).statistic
            if not np.isnan(tau):
                taus.append(tau)
        assert section["tau_ci"] == pytest.approx([np.percentile(taus, 2.5), np.percentile(taus, 97.5)])
        assert section["tau_ci"][0] <= section["tau_ci"][1]

        places = {run: rank for rank, run in enumerate(sorted(runs, key=lambda r: -human_means[runs.index(r)]), 1)}
        moved = section["largest_rank_change"]
        assert moved["human_place"] == places[moved["run"]]

    labels = report["labels"]
    pairs = [(h.split()[0], int(h.split()[3]) > 0, int(j.split()[3]) > 0) for h, j in zip(human_lines, judge_lines)]
    assert labels["pairs"] == len(pairs)
    assert labels["kappa"] == pytest.approx(cohen_kappa_score([h for _, h, _ in pairs], [j for _, _, j in pairs]))
    first = queries[0]
    mine = [(h, j) for query, h, j in pairs if query == first]
    assert labels["per_query"][first]["kappa"] == pytest.approx(
        cohen_kappa_score([h for h, _ in mine], [j for _, j in mine])
    )


# --- REST and the page, on a small collection worked by hand ------------------------------------------


@pytest.fixture
def small_board(tmp_path):
    """Four queries of four passages (d<4q>..d<4q+3>, the first relevant), three runs ranking
    the relevant passage first, second and last, and two judges' imported labels: one that
    agrees with the humans, one that calls every passage relevant."""
    collection = make_collection("small-board")
    runs = {name: {} for name in ("first", "second", "last")}
    lines, generous = [], []
    for number in range(4):
        query = make_text_query(collection, f"question {number}", external_id=f"q{number}")
        passages = make_text_passages(collection, [f"passage {number}.{i}" for i in range(4)])
        add_qrels(query, {passage: int(index == 0) for index, passage in enumerate(passages)})
        lines += [f"q{number} 0 {p.external_id} {int(i == 0)}" for i, p in enumerate(passages)]
        generous += [f"q{number} 0 {p.external_id} 1" for p in passages]
        runs["first"][query] = {p: 4 - i for i, p in enumerate(passages)}
        runs["second"][query] = {p: (3 if i == 0 else 4 - i + (1 if i == 1 else 0)) for i, p in enumerate(passages)}
        runs["last"][query] = {p: i for i, p in enumerate(passages)}
    run_ids = [make_scored_run(collection, scores).pk for scores in runs.values()]
    for name, labels in (("faithful", lines), ("generous", generous)):
        path = tmp_path / f"{name}.qrels"
        path.write_text("\n".join(labels) + "\n")
        call_json_command("import_judge_labels", name, path, "--collection", collection.name)
    return collection, run_ids


def test_rest_gives_what_the_command_gives(small_board):
    collection, run_ids = small_board
    runs = ",".join(map(str, run_ids))
    command = call_json_command(
        "judge_agreement", collection.name, "--runs", runs, "--judge", "faithful", "--bootstrap", "50"
    )
    response = api_client(make_user(staff=True)).get(
        f"/api/collections/{collection.pk}/judge-agreement/", {"runs": runs, "judge": "faithful", "bootstrap": "50"}
    )
    assert response.status_code == 200
    assert json.loads(json.dumps(command)) == response.json()
    section = command["metrics"]["nDCG@10"]
    assert section["kendall_tau"] == pytest.approx(1.0) and section["tau_ap"] == pytest.approx(1.0)
    assert command["labels"]["kappa"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"runs": "RUNS", "judge": "nobody"}, "judge"),
        ({"runs": "RUNS", "judge": ""}, "judge"),
        ({"runs": "FIRST", "judge": "faithful"}, "runs"),
        ({"runs": "RUNS,999999", "judge": "faithful"}, "runs"),
        ({"runs": "RUNS", "judge": "faithful", "human": "judge:generous"}, "human"),
        ({"runs": "RUNS", "judge": "faithful", "human": "study:999"}, "human"),
        ({"runs": "RUNS", "judge": "faithful", "metrics": "nDCG@ten"}, "metrics"),
        ({"runs": "RUNS", "judge": "faithful", "seed": "-1"}, "seed"),
        ({"runs": "RUNS", "judge": "faithful", "seed": "٣"}, "seed"),
        ({"runs": "RUNS", "judge": "faithful", "bootstrap": "1e9"}, "bootstrap"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(small_board, params, field):
    collection, run_ids = small_board
    runs = ",".join(map(str, run_ids))
    params = {key: value.replace("RUNS", runs).replace("FIRST", str(run_ids[0])) for key, value in params.items()}
    response = api_client(make_user(staff=True)).get(f"/api/collections/{collection.pk}/judge-agreement/", params)
    assert response.status_code == 400
    assert field in response.json(), response.json()


def test_annotators_and_strangers_get_nothing_from_the_api_and_the_page(small_board):
    collection, run_ids = small_board
    query = {"runs": ",".join(map(str, run_ids)), "judge": "faithful"}
    for client in (api_client(make_annotator()), api_client()):
        response = client.get(f"/api/collections/{collection.pk}/judge-agreement/", query)
        assert response.status_code in (401, 403)
        assert "faithful" not in response.content.decode()
    page = Client()
    page.force_login(make_annotator())
    response = page.get(f"/collections/{collection.pk}/judge-agreement/", query)
    assert response.status_code in (302, 403) and "faithful" not in response.content.decode()


def test_the_page_compares_every_judge_chosen(small_board):
    collection, run_ids = small_board
    client = Client()
    client.force_login(make_user(staff=True))
    blank = client.get(f"/collections/{collection.pk}/judge-agreement/")
    assert blank.status_code == 200 and "generous" in blank.content.decode()

    response = client.get(
        f"/collections/{collection.pk}/judge-agreement/",
        {"runs": [str(run) for run in run_ids], "judge": ["faithful", "generous"], "bootstrap": "20"},
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert 'id="judge-faithful"' in body and 'id="judge-generous"' in body
    assert "Cohen's κ 1.000" in body  # the faithful judge
    bad = client.get(f"/collections/{collection.pk}/judge-agreement/", {"runs": str(run_ids[0]), "judge": "faithful"})
    assert bad.status_code == 400 and "compare at least two runs" in bad.content.decode()
