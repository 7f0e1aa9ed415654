"""A test collection on real data: BIRCO's RELiC dev split (its first 16 queries, each with its
judged pool of about 50 passages; the dense model encodes 800 passages rather than 2,502, which
kept a busy two-core machine past the 10-minute test limit) with four runs: BM25 at two
settings, the bundled dense model, and an imported run of another system (it leaves queries out
and ranks passages of other queries' pools, unjudged for this one). Under the collection's
qrels, and under a relevance study pooled from two of the runs (`create_study --runs A,B --depth
K`) and partly judged by two simulated annotators who answer what the qrels say, the
leaderboard's Judged@10, nDCG@10, P@5 and Bpref equal ir-measures on the same qrels and run
files, per query and mean; leave-one-run-out equals a direct recomputation; runs the study did
not pool get the coverage warning.

Run files go to ir-measures with scores that fall with the stored rank, so the comparison holds
whatever rule orders tied scores."""

import io
import json

import ir_measures
import pytest
from django.core.management import call_command
from scipy import stats

from annotation.models import Item
from retrieval.models import Collection, Qrel
from retrieval.selectors import trec_qrels_lines, trec_run_lines
from tests.factories import add_label_judgment, call_json_command, create_pooled_study, make_annotator

pytestmark = [pytest.mark.django_db, pytest.mark.data]

MEASURES = {name: ir_measures.parse_measure(name) for name in ("Judged@10", "nDCG@10", "P@5", "Bpref")}
METRICS = " ".join(MEASURES)


@pytest.fixture(scope="module")
def module_data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("birco-data")


@pytest.fixture
def data_dir(settings, module_data_dir):
    """One data folder for the module (replacing the per-test one): the dense model encodes the
    passages once, later tests read its embedding cache."""
    settings.MARGINALIA_DATA_DIR = module_data_dir
    return module_data_dir


def imported_system(collection: Collection, bm25_run_id: int, path) -> int:
    """Another system's run as a TREC file: each query's BM25 ranking reversed, every third place
    taken by a passage of the next query's pool (unjudged for this query), three queries left out."""
    ranked: dict[str, list[str]] = {}
    for line in trec_run_lines(collection.runs.get(pk=bm25_run_id)):
        query, _, passage, *_ = line.split()
        ranked.setdefault(query, []).append(passage)
    queries = list(ranked)
    lines = []
    for number, query in enumerate(queries[3:], start=3):
        strays = iter(ranked[queries[(number + 1) % len(queries)]])
        order = []
        for passage in reversed(ranked[query]):
            if len(order) % 3 == 2:
                order.append(next(strays))
            order.append(passage)
        order = list(dict.fromkeys(order))
        lines += [f"{query} Q0 {passage} {rank} {100 - rank / 10:.2f} other" for rank, passage in enumerate(order, 1)]
    path.write_text("\n".join(lines) + "\n")
    return call_json_command("import_run", collection.name, path, "--name", "other system")["run_id"]


QUERIES = 16


def birco_subset(source, folder):
    """The first QUERIES queries of a BEIR folder with pools, their pools, qrels and passages."""
    folder.mkdir()

    def rows(name):
        return [json.loads(line) for line in (source / name).read_text(encoding="utf-8").splitlines() if line.strip()]

    queries = rows("queries.jsonl")[:QUERIES]
    kept = {query["_id"] for query in queries}
    pools = [pool for pool in rows("pools.jsonl") if pool["query-id"] in kept]
    passages = {passage for pool in pools for passage in pool["corpus-ids"]}
    header, *qrels = (source / "qrels.tsv").read_text(encoding="utf-8").splitlines()
    for name, records in (
        ("queries.jsonl", queries),
        ("pools.jsonl", pools),
        ("corpus.jsonl", [row for row in rows("corpus.jsonl") if row["_id"] in passages]),
    ):
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in records), encoding="utf-8")
    kept_qrels = [line for line in qrels if line.split("\t")[0] in kept]
    (folder / "qrels.tsv").write_text("\n".join([header, *kept_qrels]) + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def birco(shared_data, tmp_path):
    folder = birco_subset(shared_data / "birco-relic-dev", tmp_path / "birco-relic-dev")
    call_json_command("import_beir", folder, "--collection", "birco-relic-dev")
    collection = Collection.objects.get(name="birco-relic-dev")

    def retrieve(*options) -> int:
        return call_json_command("retrieve", "--collection", collection.name, *options)["run_id"]

    bm25 = retrieve("--retriever", "bm25", "--depth", "100")
    runs = [bm25, retrieve("--retriever", "bm25", "--k1", "1.2", "--b", "0.75", "--depth", "20")]
    runs.append(retrieve("--retriever", "dense", "--depth", "100"))
    runs.append(imported_system(collection, bm25, tmp_path / "other.trec"))
    return collection, runs


def run_file(run_id: int) -> list:
    """The exported TREC run, scores replaced by a falling sequence in the file's order."""
    out = io.StringIO()
    call_command("export_run", run_id, stdout=out)
    docs = list(ir_measures.read_trec_run(io.StringIO(out.getvalue())))
    return [ir_measures.ScoredDoc(doc.query_id, doc.doc_id, float(len(docs) - index)) for index, doc in enumerate(docs)]


def qrels_file(lines: list[str]) -> list:
    return list(ir_measures.read_trec_qrels(io.StringIO("\n".join(lines) + "\n")))


def assert_equal_to_ir_measures(board: dict, qrels: list, run_ids: list[int]) -> None:
    judged_queries = sorted({qrel.query_id for qrel in qrels})
    for run_id in run_ids:
        expected = {
            (m.query_id, str(m.measure)): m.value
            for m in ir_measures.iter_calc(MEASURES.values(), qrels, run_file(run_id))
        }
        entry, per_query = board["runs"][str(run_id)], board["per_query"][str(run_id)]
        assert sorted(per_query["metrics"]["nDCG@10"]) == judged_queries
        for name in MEASURES:
            values = {query: expected[query, name] for query in judged_queries}
            assert per_query["metrics"][name] == pytest.approx(values, abs=1e-12), (run_id, name)
            assert entry["metrics"][name] == pytest.approx(sum(values.values()) / len(values), abs=1e-12)
        assert entry["judged"]["10"] == pytest.approx(entry["metrics"]["Judged@10"], abs=1e-12)
        assert per_query["judged"]["10"] == pytest.approx(per_query["metrics"]["Judged@10"], abs=1e-12)


def leaderboard(collection, runs, *options) -> dict:
    ids = ",".join(map(str, runs))
    return call_json_command(
        "leaderboard", collection.name, "--runs", ids, "--metrics", METRICS, "--per-query", *options
    )


def test_under_the_collections_qrels_every_figure_is_ir_measures(birco):
    collection, runs = birco
    qrels = qrels_file([line.strip() for line in trec_qrels_lines(collection)])
    board = leaderboard(collection, runs, "--leave-one-out", "10")

    assert board["queries"] == QUERIES and len(qrels) == Qrel.objects.filter(query__collection=collection).count()
    assert_equal_to_ir_measures(board, qrels, runs)
    other = board["runs"][str(runs[3])]
    assert other["judged"]["10"] < 0.8 and other["coverage_warning"] is not None
    assert all(board["runs"][str(run_id)]["judged"]["10"] == 1.0 for run_id in runs[:3])

    # Leave-one-run-out, worked out directly: each run without the judged pairs only its top 10 had.
    tops = {run_id: {} for run_id in runs}
    for run_id in runs:
        for doc in run_file(run_id):
            tops[run_id].setdefault(doc.query_id, []).append(doc.doc_id)
    pools = {run_id: {(q, d) for q, docs in tops[run_id].items() for d in docs[:10]} for run_id in runs}
    judged_pairs = {(qrel.query_id, qrel.doc_id) for qrel in qrels}
    full = {run_id: board["runs"][str(run_id)]["metrics"] for run_id in runs}
    direct = {}
    for run_id in runs:
        others = set().union(*(pools[other] for other in runs if other != run_id))
        unique = (pools[run_id] - others) & judged_pairs
        reduced = [qrel for qrel in qrels if (qrel.query_id, qrel.doc_id) not in unique]
        values = ir_measures.iter_calc(MEASURES.values(), reduced, run_file(run_id))
        sums = dict.fromkeys(MEASURES, 0.0)
        for metric in values:
            sums[str(metric.measure)] += metric.value
        direct[run_id] = {name: total / QUERIES for name, total in sums.items()}  # the same queries
        entry = board["leave_one_out"][str(run_id)]
        assert entry["removed_pairs"] == len(unique)
        assert entry["metrics"] == pytest.approx(direct[run_id], abs=1e-12)
    for name in MEASURES:
        tau = stats.kendalltau([full[r][name] for r in runs], [direct[r][name] for r in runs]).statistic
        assert board["kendall_tau"][name] == (None if tau != tau else pytest.approx(tau, abs=1e-12))
        for run_id in runs:
            place = 1 + sum(full[o][name] > full[run_id][name] for o in runs if o != run_id)
            moved = 1 + sum(full[o][name] > direct[run_id][name] for o in runs if o != run_id)
            ties = runs[: runs.index(run_id)]
            place += sum(full[o][name] == full[run_id][name] for o in ties)
            moved += sum(full[o][name] == direct[run_id][name] for o in ties)
            assert board["leave_one_out"][str(run_id)]["rank_change"][name] == moved - place


def study_qrels_lines(study_id: int) -> list[str]:
    """The study's qrels as `export_qrels` writes them."""
    out = io.StringIO()
    call_command("export_qrels", study_id, stdout=out)
    return out.getvalue().splitlines()


def test_under_a_partly_judged_study_pool_every_figure_is_ir_measures_and_unpooled_runs_are_warned(birco):
    collection, runs = birco
    study = create_pooled_study(collection, [runs[0], runs[2]], depth=5, name="pool of bm25 and dense", seed=3)
    annotators = [make_annotator("reader-a"), make_annotator("reader-b")]
    relevance = {
        (query, passage): grade
        for query, passage, grade in Qrel.objects.filter(query__collection=collection).values_list(
            "query_id", "passage_id", "relevance"
        )
    }
    items = Item.objects.filter(study_id=study, role=Item.Role.WORK).order_by("position").prefetch_related("candidates")
    judged = 0
    for item in items:
        if item.position % 4 == 3:
            continue  # a quarter of the pool is still waiting for its judgments
        label = int(relevance.get((item.query_id, item.candidates.get().passage_id), 0) > 0)
        for annotator in annotators:
            add_label_judgment(item, annotator, label)
        judged += 1
    source = f"study:{study}"
    board = leaderboard(collection, runs, "--qrels", source, "--coverage-threshold", "0.6")
    qrels = qrels_file(study_qrels_lines(study))

    assert len(qrels) == judged and board["qrels"] == source
    assert board["queries"] == len({qrel.query_id for qrel in qrels})
    assert_equal_to_ir_measures(board, qrels, runs)
    pooled, unpooled = board["runs"][str(runs[0])], board["runs"][str(runs[3])]
    assert pooled["judged"]["10"] > unpooled["judged"]["10"]
    assert unpooled["coverage_warning"].startswith("Judged@") and source in unpooled["coverage_warning"]

    # The same figures through evaluate_run, with the coverage per query.
    report = call_json_command(
        "evaluate_run", runs[3], "--qrels", source, "--metrics", METRICS, "--per-query", "--coverage-threshold", "0.6"
    )
    assert report["metrics"]["judged@10"] == pytest.approx(unpooled["metrics"]["Judged@10"], abs=1e-12)
    assert report["metrics"]["ndcg@10"] == pytest.approx(unpooled["metrics"]["nDCG@10"], abs=1e-12)
    judged_10 = {query: values["10"] for query, values in report["judged_per_query"].items()}
    assert judged_10 == pytest.approx(board["per_query"][str(runs[3])]["judged"]["10"], abs=1e-12)
    assert report["coverage"]["warning"] == unpooled["coverage_warning"] and report["beyond_depth"] == []
