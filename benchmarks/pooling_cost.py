#!/usr/bin/env python
"""How many (query, passage) pairs each pooling strategy needs judged before the judged pairs
rank the systems as the full qrels do: Kendall's tau >= 0.9 between the runs ranked by nDCG@10
under BIRCO's full qrels and under the judged subset (unjudged pairs count as not relevant).

On BIRCO's RELiC dev split (../shared/data/birco-relic-dev: 50 queries, each with its own pool of
~50 passages, one relevant), in a fresh SQLite database of its own, the benchmark builds a
leaderboard worth ranking: BM25 at four k1/b settings, the bundled dense model, and three runs
imported as TREC files (reciprocal-rank fusion of BM25 and dense, the dense run with its top ten
shuffled on a seeded share of the queries, a word-overlap ranker). Every run is pooled to
--depth. The annotators are simulated from the qrels: one judgment per pair, the pair's qrel.

- depth, rrf, rbp: the study is created with the strategy and no budget, and its pool's order is
  read back; with a budget B the strategy judges the first B pairs of that order.
- mtf: the study is judged through the queue (claim, submit) by the simulated annotator, so the
  order is the one move-to-front draws as the judgments land; with a budget B it judges the first
  B of them (one annotator, look-ahead 1: nothing is drawn ahead).
- depth-k (TREC): the union of every run's top k, for k = 1, 2, ...
nDCG@10 is computed by ir-measures (trec_eval's ndcg_cut.10) per query, averaged over all
queries (a query without a judged relevant pair scores 0); tau is scipy's kendalltau (tau-b).
Judging a non-relevant pair changes no run's nDCG@10, so tau is evaluated after each relevant
pair. Printed per strategy: the pairs judged when tau first reaches 0.9, the pairs from which it
stays >= 0.9, each as a share of the pool and as a ratio to depth-k pooling measured in the same
run. Then each strategy's first budget is checked end to end: a study created with that
`--budget`, judged through the queue, its qrels exported with `export_qrels` (the majority of the
simulated judgments), gives the same tau.

Usage, from the project root (the dense run takes minutes on a CPU; --cache keeps its
embeddings for the next time):
    .venv/bin/python benchmarks/pooling_cost.py [--depth 50] [--cache var/pooling-cache] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "birco-relic-dev"
COLLECTION = "birco-relic-dev"
TAU = 0.9
BM25_SETTINGS = [(0.5, 0.9), (1.2, 0.75), (0.9, 0.4), (2.0, 1.0)]
STRATEGIES = ("depth", "rrf", "rbp", "mtf")


def setup(workdir: Path, cache: Path | None) -> None:
    """Django on a fresh SQLite database in `workdir`, models and caches in `cache`."""
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'pooling.sqlite3'}"
    os.environ["MARGINALIA_DATA_DIR"] = str(cache or workdir / "data")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def command(name: str, *args) -> dict:
    from django.core.management import call_command

    out = io.StringIO()
    call_command(name, *map(str, args), "--json", stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def read_rankings(run_id: int) -> dict[str, list[str]]:
    """A run as export_run writes it: query id -> passage ids by rank."""
    from django.core.management import call_command

    out = io.StringIO()
    call_command("export_run", str(run_id), stdout=out)
    ranked = defaultdict(list)
    for line in out.getvalue().splitlines():
        query, _, passage, rank, _, _ = line.split()
        ranked[query].append((int(rank), passage))
    return {query: [passage for _, passage in sorted(hits)] for query, hits in ranked.items()}


def write_trec(path: Path, rankings: dict[str, list[str]], tag: str) -> Path:
    path.write_text(
        "".join(
            f"{query} Q0 {passage} {rank} {-rank} {tag}\n"
            for query, ranking in rankings.items()
            for rank, passage in enumerate(ranking, start=1)
        )
    )
    return path


def word_overlap(data: Path) -> dict[str, list[str]]:
    """Each pool's passages by the share of the query's distinct words they contain."""
    texts = {row["_id"]: row["text"] for row in map(json.loads, (data / "corpus.jsonl").read_text().splitlines())}
    queries = {row["_id"]: row["text"] for row in map(json.loads, (data / "queries.jsonl").read_text().splitlines())}

    def words(text):
        return set(re.findall(r"\w+", text.lower()))

    rankings = {}
    for row in map(json.loads, (data / "pools.jsonl").read_text().splitlines()):
        query = words(queries[row["query-id"]])
        rankings[row["query-id"]] = sorted(row["corpus-ids"], key=lambda pid: (-len(query & words(texts[pid])), pid))
    return rankings


def fuse(first: dict[str, list[str]], second: dict[str, list[str]], k: int = 60) -> dict[str, list[str]]:
    fused = {}
    for query in first:
        scores = defaultdict(float)
        for ranking in (first[query], second[query]):
            for rank, passage in enumerate(ranking, start=1):
                scores[passage] += 1 / (k + rank)
        fused[query] = sorted(scores, key=lambda passage: (-scores[passage], passage))
    return fused


def perturb(rankings: dict[str, list[str]], share: float, seed: int = 7) -> dict[str, list[str]]:
    rng = random.Random(seed)
    perturbed = {}
    for query in sorted(rankings):
        ranking = list(rankings[query])
        if rng.random() < share:
            head = ranking[:10]
            rng.shuffle(head)
            ranking[:10] = head
        perturbed[query] = ranking
    return perturbed


def build_runs(data: Path, workdir: Path) -> dict[str, int]:
    """The leaderboard's runs, by name -> run id."""
    runs = {}
    for k1, b in BM25_SETTINGS:
        started = time.monotonic()
        runs[f"bm25 k1={k1} b={b}"] = command(
            "retrieve", "--collection", COLLECTION, "--retriever", "bm25", "--k1", k1, "--b", b, "--depth", 100
        )["run_id"]
        print(f"  bm25 k1={k1} b={b}: {time.monotonic() - started:.0f} s", flush=True)
    started = time.monotonic()
    runs["dense MiniLM"] = command("retrieve", "--collection", COLLECTION, "--retriever", "dense", "--depth", 100)[
        "run_id"
    ]
    print(f"  dense: {time.monotonic() - started:.0f} s", flush=True)
    bm25, dense = read_rankings(runs["bm25 k1=0.5 b=0.9"]), read_rankings(runs["dense MiniLM"])
    imported = {
        "rrf(bm25, dense)": fuse(bm25, dense),
        "dense, top 10 shuffled on 40%": perturb(dense, 0.4),
        "word overlap": word_overlap(data),
    }
    for name, rankings in imported.items():
        path = write_trec(workdir / f"{len(runs)}.trec", rankings, "imported")
        runs[name] = command("import_run", COLLECTION, path, "--name", name)["run_id"]
    return runs


def full_qrels(data: Path) -> dict[str, dict[str, int]]:
    qrels = defaultdict(dict)
    for line in (data / "qrels.tsv").read_text().splitlines()[1:]:
        query, passage, score = line.split("\t")
        qrels[query][passage] = int(score)
    return dict(qrels)


class Leaderboard:
    """nDCG@10 of every run under some qrels (ir-measures), and tau against the full qrels'."""

    def __init__(self, rankings: dict[str, dict[str, list[str]]], queries: list[str], qrels: dict):
        self.runs = {
            name: {
                query: {passage: -rank for rank, passage in enumerate(ranking, start=1)}
                for query, ranking in run.items()
            }
            for name, run in rankings.items()
        }
        self.queries = queries
        self.full = self.scores(qrels)

    def scores(self, qrels: dict) -> list[float]:
        import ir_measures
        from ir_measures import nDCG

        means = []
        for run in self.runs.values():
            values = {metric.query_id: metric.value for metric in ir_measures.iter_calc([nDCG @ 10], qrels, run)}
            means.append(sum(values.get(query, 0.0) for query in self.queries) / len(self.queries))
        return means

    def tau(self, qrels: dict) -> float:
        from scipy.stats import kendalltau

        return float(kendalltau(self.full, self.scores(qrels)).statistic)


def curve(order: list[tuple[str, str]], qrels: dict, board: Leaderboard) -> list[tuple[int, float]]:
    """(pairs judged, tau) after each relevant pair of `order` (tau changes only there)."""
    judged = defaultdict(dict)
    points = [(0, board.tau({}))]
    for count, (query, passage) in enumerate(order, start=1):
        relevance = qrels.get(query, {}).get(passage, 0)
        judged[query][passage] = relevance
        if relevance > 0:
            points.append((count, board.tau(judged)))
    return points


def costs(points: list[tuple[int, float]], total: int) -> tuple[int | None, int | None]:
    """Pairs judged when tau first reaches TAU, and from which it stays there."""
    first = next((count for count, tau in points if tau >= TAU), None)
    stays = None
    for count, tau in reversed(points):
        if tau < TAU:
            break
        stays = count
    return first, stays if stays is not None else (None if first is None else total)


def static_order(strategy: str, run_ids: list[int], depth: int, name: str) -> list[tuple[str, str]]:
    from annotation.models import Study
    from annotation.selectors import pool_pairs

    created = command(
        "create_study", "--kind", "relevance", "--collection", COLLECTION, "--name", name,
        "--runs", ",".join(map(str, run_ids)), "--depth", depth, "--pool", strategy, "--judgments-per-item", 1,
    )  # fmt: skip
    return [(pair["query"], pair["passage"]) for pair in pool_pairs(Study.objects.get(pk=created["study_id"]))]


def simulated_annotator(name: str):
    from django.contrib.auth import get_user_model

    from annotation.models import AnnotatorProfile

    user = get_user_model().objects.create_user(username=name)
    AnnotatorProfile.objects.create(user=user)
    return user


def judge_through_the_queue(study_id: int, qrels: dict, name: str) -> list[tuple[str, str]]:
    """A simulated annotator judges everything the queue gives, each pair's qrel as its label;
    returns the pairs in judging order."""
    from annotation.models import Item, Study
    from annotation.services import claim_next_item, submit_judgment

    annotator = simulated_annotator(name)
    study = Study.objects.get(pk=study_id)
    judged = []
    while (assignment := claim_next_item(study, annotator)) is not None:
        item = Item.objects.select_related("query").get(pk=assignment.item_id)
        passage = item.candidates.select_related("passage").get().passage.external_id
        query = item.query.external_id
        submit_judgment(annotator=annotator, item=assignment.item, label=int(qrels[query].get(passage, 0) > 0))
        judged.append((query, passage))
        if len(judged) % 250 == 0:
            print(f"    {len(judged)} pairs judged", flush=True)
    return judged


def exported_qrels(study_id: int) -> dict:
    from django.core.management import call_command

    out = io.StringIO()
    call_command("export_qrels", str(study_id), stdout=out)
    qrels = defaultdict(dict)
    for line in out.getvalue().splitlines():
        query, _, passage, relevance = line.split()
        qrels[query][passage] = int(relevance)
    return qrels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="BIRCO's RELiC dev split as a BEIR folder.")
    parser.add_argument("--depth", type=int, default=50, help="How far down every run is pooled.")
    parser.add_argument("--cache", type=Path, help="MARGINALIA_DATA_DIR to keep (dense embeddings) between runs.")
    parser.add_argument("--json", action="store_true", help="Print the results as one JSON object at the end.")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pooling-cost-"))
    setup(workdir, args.cache)
    from annotation.models import PooledPair

    print(f"importing {args.data} and ranking it", flush=True)
    command("import_beir", args.data, "--collection", COLLECTION)
    run_ids = build_runs(args.data, workdir)
    rankings = {name: read_rankings(run_id) for name, run_id in run_ids.items()}
    qrels = full_qrels(args.data)
    board = Leaderboard(rankings, sorted(qrels), qrels)
    pooled = {
        (query, passage)
        for run in rankings.values()
        for query, ranking in run.items()
        for passage in ranking[: args.depth]
    }
    print(f"{len(run_ids)} runs, {len(qrels)} queries, {len(pooled)} pairs pooled at depth {args.depth}", flush=True)

    orders = {}
    for strategy in ("depth", "rrf", "rbp"):
        orders[strategy] = static_order(strategy, list(run_ids.values()), args.depth, f"order {strategy}")
    print("  mtf: judging the whole pool through the queue", flush=True)
    mtf = command(
        "create_study", "--kind", "relevance", "--collection", COLLECTION, "--name", "order mtf",
        "--runs", ",".join(map(str, run_ids.values())), "--depth", args.depth, "--pool", "mtf",
        "--judgments-per-item", 1,
    )  # fmt: skip
    orders["mtf"] = judge_through_the_queue(mtf["study_id"], qrels, "simulated-mtf")
    drawn = PooledPair.objects.filter(pool__study_id=mtf["study_id"]).order_by("order")
    assert orders["mtf"] == list(drawn.exclude(order=None).values_list("query__external_id", "passage__external_id"))

    results = {}
    for strategy, order in orders.items():
        assert set(order) == pooled, strategy
        points = curve(order, qrels, board)
        first, stays = costs(points, len(order))
        results[strategy] = {"first": first, "stays": stays, "tau": dict(points).get(first)}
    trec = []  # (pairs judged, tau, k)
    for k in range(1, args.depth + 1):
        judged = defaultdict(dict)
        for run in rankings.values():
            for query, ranking in run.items():
                for passage in ranking[:k]:
                    judged[query][passage] = qrels[query].get(passage, 0)
        trec.append((sum(map(len, judged.values())), board.tau(judged), k))
    first = next(((count, k) for count, tau, k in trec if tau >= TAU), (None, None))
    stays = None
    for count, tau, k in reversed(trec):
        if tau < TAU:
            break
        stays = (count, k)
    results["depth-k (TREC)"] = {
        "first": first[0],
        "first_k": first[1],
        "stays": stays[0] if stays else None,
        "stays_k": stays[1] if stays else None,
        "tau": next((tau for count, tau, k in trec if k == first[1]), None),
    }

    peer = results["depth-k (TREC)"]["first"]
    print()
    print("Full-qrels leaderboard (nDCG@10):")
    for name, score in sorted(zip(run_ids, board.full), key=lambda entry: -entry[1]):
        print(f"  {score:.4f}  {name}")
    print()
    print(f"Pairs judged to reach Kendall tau >= {TAU} (pool: {len(pooled)} pairs; ratio to depth-k pooling):")
    print(f"  {'strategy':<20}{'first':>8}{'share':>8}{'ratio':>8}{'stays':>8}{'tau':>8}")
    for strategy, row in results.items():
        share = f"{row['first'] / len(pooled):.1%}" if row["first"] else "-"
        ratio = f"{row['first'] / peer:.2f}" if row["first"] and peer else "-"
        label = strategy if "first_k" not in row else f"{strategy} k={row['first_k']}"
        tau = f"{row['tau']:.3f}" if row["tau"] is not None else "-"
        print(f"  {label:<20}{row['first'] or '-':>8}{share:>8}{ratio:>8}{row['stays'] or '-':>8}{tau:>8}")
    print()
    print("Each first budget end to end (create_study --budget, judged through the queue, export_qrels):")
    for strategy in STRATEGIES:
        budget = results[strategy]["first"]
        if budget is None:
            continue
        study = command(
            "create_study", "--kind", "relevance", "--collection", COLLECTION, "--name", f"budget {strategy}",
            "--runs", ",".join(map(str, run_ids.values())), "--depth", args.depth, "--pool", strategy,
            "--budget", budget, "--judgments-per-item", 1,
        )  # fmt: skip
        judged = judge_through_the_queue(study["study_id"], qrels, f"simulated-budget-{strategy}")
        assert len(judged) == budget and set(judged) == set(orders[strategy][:budget]), strategy
        assert board.tau(exported_qrels(study["study_id"])) == results[strategy]["tau"], strategy
        print(f"  {strategy}: {budget} pairs judged, the ones its order gave, tau {results[strategy]['tau']:.3f} again")
    if args.json:
        print(json.dumps({"pool": len(pooled), "depth": args.depth, "runs": list(run_ids), "results": results}))


if __name__ == "__main__":
    main()
