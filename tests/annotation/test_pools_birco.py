"""Every pooling strategy against an independent computation on real data: BIRCO's RELiC dev
split (a subset of its queries, each with its own pool of ~50 passages), ranked by four systems
— BM25 at two k1/b settings, the bundled dense model, and an imported run from another system
(word overlap, written here and imported as a TREC file). The checks read the runs back as TREC
files (`export_run`) and compute each pool directly: depth as the union of the top k, rrf and
rbp with exact fractions, move-to-front as Cormack, Palmer & Clarke's rule for one topic,
judging with the qrels as the (scripted) annotator."""

import io
import json
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

import pytest
from django.core.management import call_command
from django.test import override_settings

from annotation.models import Item, Judgment, PooledPair, Study
from annotation.selectors import pool_pairs
from annotation.services import claim_next_item, create_relevance_study, submit_judgment
from annotation.services.pools import extend_pool
from retrieval.models import Collection, Qrel, Retriever, Run
from tests.conftest import SHARED_DATA, require
from tests.factories import call_json_command, make_annotator

pytestmark = [pytest.mark.django_db, pytest.mark.data]

QUERIES = 6  # BIRCO's first six queries: ~300 passages, so the dense run stays affordable on a CPU
DEPTH = 20


@dataclass
class Birco:
    collection: Collection
    runs: dict[str, Run]
    rankings: dict[str, dict[str, list[str]]]  # run name -> query id -> passage ids, best first
    relevant: dict[str, set[str]]  # query id -> relevant passage ids (qrels)


def subset(source, target, count: int) -> None:
    """The first `count` queries of a BEIR folder with their pools, passages and qrels."""
    target.mkdir()
    queries = (source / "queries.jsonl").read_text().splitlines()[:count]
    wanted = {json.loads(line)["_id"] for line in queries}
    pools = [
        line for line in (source / "pools.jsonl").read_text().splitlines() if json.loads(line)["query-id"] in wanted
    ]
    passages = {passage for line in pools for passage in json.loads(line)["corpus-ids"]}
    corpus = [
        line for line in (source / "corpus.jsonl").read_text().splitlines() if json.loads(line)["_id"] in passages
    ]
    header, *qrels = (source / "qrels.tsv").read_text().splitlines()
    for name, lines in {
        "queries.jsonl": queries,
        "pools.jsonl": pools,
        "corpus.jsonl": corpus,
        "qrels.tsv": [header, *(line for line in qrels if line.split("\t")[0] in wanted)],
    }.items():
        (target / name).write_text("\n".join(lines) + "\n")


def word_overlap_run(folder, path) -> None:
    """Another system's run, as a TREC file: each pool passage scored by the share of the query's
    distinct words it contains."""
    texts = {row["_id"]: row["text"] for row in map(json.loads, (folder / "corpus.jsonl").read_text().splitlines())}
    words = lambda text: set(re.findall(r"\w+", text.lower()))  # noqa: E731
    queries = {
        row["_id"]: words(row["text"]) for row in map(json.loads, (folder / "queries.jsonl").read_text().splitlines())
    }
    lines = []
    for row in map(json.loads, (folder / "pools.jsonl").read_text().splitlines()):
        query = queries[row["query-id"]]
        scored = sorted(row["corpus-ids"], key=lambda pid: (-len(query & words(texts[pid])) / len(query), pid))
        lines += [f"{row['query-id']} Q0 {pid} {rank} {-rank} overlap" for rank, pid in enumerate(scored, start=1)]
    path.write_text("\n".join(lines) + "\n")


def trec_rankings(run: Run) -> dict[str, list[str]]:
    """The run as `export_run` writes it, read back: query id -> passage ids by rank."""
    out = io.StringIO()
    call_command("export_run", str(run.pk), stdout=out)
    ranked = defaultdict(list)
    for line in out.getvalue().splitlines():
        query, _, passage, rank, _, _ = line.split()
        ranked[query].append((int(rank), passage))
    return {query: [passage for _, passage in sorted(hits)] for query, hits in ranked.items()}


@pytest.fixture(scope="module")
def birco(django_db_setup, django_db_blocker, tmp_path_factory):
    require((SHARED_DATA / "birco-relic-dev").is_dir(), "birco-relic-dev is missing")
    folder = tmp_path_factory.mktemp("birco") / "relic-dev-subset"
    subset(SHARED_DATA / "birco-relic-dev", folder, QUERIES)
    with django_db_blocker.unblock(), override_settings(MARGINALIA_DATA_DIR=tmp_path_factory.mktemp("data")):
        call_json_command("import_beir", folder, "--collection", "birco-pools")
        retrieve = ("retrieve", "--collection", "birco-pools", "--depth", 100, "--retriever")
        run_ids = {
            "bm25": call_json_command(*retrieve, "bm25")["run_id"],
            "bm25-k1.2-b.75": call_json_command(*retrieve, "bm25", "--k1", 1.2, "--b", 0.75)["run_id"],
            "dense": call_json_command(*retrieve, "dense")["run_id"],
        }
        word_overlap_run(folder, folder / "overlap.trec")
        run_ids["imported"] = call_json_command(
            "import_run", "birco-pools", folder / "overlap.trec", "--name", "overlap"
        )["run_id"]
        runs = {name: Run.objects.get(pk=pk) for name, pk in run_ids.items()}
        collection = Collection.objects.get(name="birco-pools")
        relevant = defaultdict(set)
        for query, passage in Qrel.objects.filter(query__collection=collection, relevance__gt=0).values_list(
            "query__external_id", "passage__external_id"
        ):
            relevant[query].add(passage)
        yield Birco(collection, runs, {name: trec_rankings(run) for name, run in runs.items()}, dict(relevant))
        retrievers = [run.retriever_id for run in runs.values()]
        collection.delete()
        Retriever.objects.filter(pk__in=retrievers).delete()


def create(birco: Birco, names: list[str], **settings) -> Study:
    options = {
        "name": f"birco {len(Study.objects.all())}",
        "collection": birco.collection,
        "runs": [birco.runs[name] for name in names],
        "depth": DEPTH,
        "seed": 3,
        **settings,
    }
    return create_relevance_study(**options).study


def judged(study: Study) -> set[tuple[str, str]]:
    return set(Item.objects.filter(study=study).values_list("query__external_id", "candidates__passage__external_id"))


def top(birco: Birco, name: str, depth: int) -> set[tuple[str, str]]:
    return {(query, passage) for query, ranking in birco.rankings[name].items() for passage in ranking[:depth]}


def fused(birco: Birco, names: list[str], weight, query_order: list[str]) -> list[tuple[str, str]]:
    """Every pair of the runs' top DEPTH, by the exact sum of `weight(rank)` over the runs that
    rank it, ties by query order then passage id."""
    scores = defaultdict(Fraction)
    for name in names:
        for query, ranking in birco.rankings[name].items():
            for rank, passage in enumerate(ranking[:DEPTH], start=1):
                scores[query, passage] += weight(rank)
    place = {query: index for index, query in enumerate(query_order)}
    return sorted(scores, key=lambda pair: (-scores[pair], place[pair[0]], pair[1]))


def query_order(study: Study) -> list[str]:
    ids = dict(Item.objects.filter(study=study).values_list("query_id", "query__external_id"))
    ids |= dict(PooledPair.objects.filter(pool__study=study).values_list("query_id", "query__external_id"))
    return [ids[query] for query in study.pool.queries]


ALL = ["bm25", "bm25-k1.2-b.75", "dense", "imported"]


def test_the_four_systems_rank_every_pool_and_disagree(birco):
    assert all(len(birco.rankings[name]) == QUERIES for name in ALL)
    tops = [birco.rankings[name][next(iter(birco.relevant))][:5] for name in ALL]
    assert len({tuple(ranking) for ranking in tops}) > 1


def test_depth_judges_the_union_of_every_runs_top_k(birco):
    study = create(birco, ALL, depth=10)
    expected = set().union(*(top(birco, name, 10) for name in ALL))
    assert judged(study) == expected and study.items.count() == len(expected)


@pytest.mark.parametrize(
    ("strategy", "weight", "options"),
    [
        ("rrf", lambda rank: Fraction(1, 60 + rank), {}),
        ("rrf", lambda rank: Fraction(1, 10 + rank), {"rrf_k": 10}),
        ("rbp", lambda rank: Fraction(1, 5) * Fraction(4, 5) ** (rank - 1), {}),
        ("rbp", lambda rank: Fraction(1, 20) * Fraction(19, 20) ** (rank - 1), {"rbp_p": 0.95}),
    ],
)
def test_fusion_orders_equal_a_direct_computation(birco, strategy, weight, options):
    study = create(birco, ALL, pool=strategy, budget=40, **options)
    order = fused(birco, ALL, weight, query_order(study))
    pairs = pool_pairs(study)
    assert [(pair["query"], pair["passage"]) for pair in pairs] == order
    assert judged(study) == set(order[:40])
    by_pair = {(pair["query"], pair["passage"]): pair for pair in pairs}
    exact = defaultdict(Fraction)
    for name in ALL:
        for query, ranking in birco.rankings[name].items():
            for rank, passage in enumerate(ranking[:DEPTH], start=1):
                exact[query, passage] += weight(rank)
    assert all(by_pair[pair]["score"] == pytest.approx(float(value), rel=1e-12) for pair, value in exact.items())


def test_a_budget_per_query_judges_each_querys_head_of_the_fused_order(birco):
    study = create(birco, ALL, pool="rrf", budget_per_query=4)
    order = fused(birco, ALL, lambda rank: Fraction(1, 60 + rank), query_order(study))
    heads = defaultdict(list)
    for query, passage in order:
        if len(heads[query]) < 4:
            heads[query].append(passage)
    assert judged(study) == {(query, passage) for query, passages in heads.items() for passage in passages}


def published_mtf(rankings: list[list[str]], relevant: set[str]) -> list[tuple[int, str]]:
    """Move-to-front for one topic as Cormack, Palmer & Clarke (1998) describe it: every run
    starts with the same priority; documents are judged from the top of the run with the highest
    priority (the first listed on a tie), skipping those judged already, for as long as they are
    relevant; a non-relevant one lowers that run's priority and the highest-priority run goes on.
    Returns (run index, document) in judging order."""
    priority = [0] * len(rankings)
    judged_docs: set[str] = set()
    order = []
    current = None
    while True:
        live = [run for run, ranking in enumerate(rankings) if any(doc not in judged_docs for doc in ranking)]
        if not live:
            return order
        if current not in live:
            current = max(live, key=lambda run: (priority[run], -run))
        doc = next(doc for doc in rankings[current] if doc not in judged_docs)
        judged_docs.add(doc)
        order.append((current, doc))
        if doc not in relevant:
            priority[current] -= 1
            current = None


def judge_with_qrels(study: Study, birco: Birco) -> None:
    """One annotator judges whatever the queue gives, label 1 exactly for the qrels' relevant pairs."""
    annotator = make_annotator()
    while (assignment := claim_next_item(study, annotator)) is not None:
        item = Item.objects.select_related("query").get(pk=assignment.item_id)
        passage = item.candidates.get().passage.external_id
        submit_judgment(
            annotator=annotator, item=assignment.item, label=int(passage in birco.relevant[item.query.external_id])
        )


def mtf_draws_by_query(study: Study, names: list[str], birco: Birco) -> dict[str, list[tuple[int, str]]]:
    index = {birco.runs[name].pk: position for position, name in enumerate(names)}
    draws = defaultdict(list)
    pairs = PooledPair.objects.filter(pool__study=study, item__isnull=False).order_by("order")
    for query, run, passage in pairs.values_list("query__external_id", "drawn_from_id", "passage__external_id"):
        draws[query].append((index[run], passage))
    return draws


def test_move_to_front_follows_the_published_rule_on_every_query(birco):
    names = ["bm25", "dense", "imported"]
    study = create(birco, names, pool="mtf", judgments_per_item=1, depth=10)
    judge_with_qrels(study, birco)
    draws = mtf_draws_by_query(study, names, birco)
    for query, relevant in birco.relevant.items():
        rankings = [birco.rankings[name][query][:10] for name in names]
        assert draws[query] == published_mtf(rankings, relevant), query
    assert judged(study) == set().union(*(top(birco, name, 10) for name in names))


def test_under_a_budget_move_to_front_judges_a_prefix_of_the_rule_on_each_query(birco):
    names = ["bm25", "bm25-k1.2-b.75", "dense", "imported"]
    study = create(birco, names, pool="mtf", judgments_per_item=1, budget=45)
    judge_with_qrels(study, birco)
    assert study.items.count() == 45 and Judgment.objects.filter(item__study=study).count() == 45
    draws = mtf_draws_by_query(study, names, birco)
    for query, relevant in birco.relevant.items():
        rankings = [birco.rankings[name][query][:DEPTH] for name in names]
        rule = published_mtf(rankings, relevant)
        assert draws[query] == rule[: len(draws[query])], query
    # each priority level is shared by all queries: none gets far ahead of another
    sizes = [len(draws[query]) for query in birco.relevant]
    assert max(sizes) - min(sizes) <= len(names) + max(map(len, birco.relevant.values()))


def test_move_to_front_decides_by_the_majority_of_three_annotators(birco):
    names = ["bm25", "dense"]
    study = create(birco, names, pool="mtf", judgments_per_item=3, budget=12)
    rng = random.Random(5)
    annotators = [make_annotator() for _ in range(3)]
    votes = {}
    while True:
        claims = [claim_next_item(study, annotator) for annotator in annotators]
        if all(claim is None for claim in claims):
            break
        for annotator, claim in zip(annotators, claims):
            if claim is None:
                continue
            item = claim.item
            truth = item.candidates.get().passage.external_id in birco.relevant[item.query.external_id]
            label = int(truth) if rng.random() < 0.8 else 1 - int(truth)  # a fallible annotator
            votes.setdefault(item.pk, []).append(label)
            submit_judgment(annotator=annotator, item=item, label=label)
    decided = PooledPair.objects.filter(pool__study=study, decided__isnull=False)
    assert decided.count() == study.items.count() == 12
    assert all(pair.relevant == (sum(votes[pair.item_id]) >= 2) for pair in decided)


def test_adding_the_imported_run_adds_only_its_new_pairs_and_keeps_the_judgments(birco):
    names = ["bm25", "bm25-k1.2-b.75", "dense"]
    study = create(birco, names, depth=5, judgments_per_item=1)
    judge_with_qrels(study, birco)
    before = set(Judgment.objects.filter(item__study=study).values_list("pk", "item_id", "label"))
    pooled = set().union(*(top(birco, name, 5) for name in names))
    extension = extend_pool(study, [birco.runs["imported"]])
    new = top(birco, "imported", 5) - pooled
    assert (extension.pairs_added, extension.items_added) == (len(new), len(new))
    assert extension.pairs_already_pooled == len(top(birco, "imported", 5) & pooled)
    assert judged(study) == pooled | new
    assert before == set(Judgment.objects.filter(item__study=study).values_list("pk", "item_id", "label"))
    shared = PooledPair.objects.filter(pool__study=study, hits__run=birco.runs["imported"], extension=0)
    assert shared.count() == extension.pairs_already_pooled
