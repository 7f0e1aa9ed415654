"""The measure vocabulary: ir-measures' names, trec_eval's as aliases and the project's own, and
every measure's per-query value against ir-measures (pytrec_eval and its Judged provider inside)
on random rankings with graded, non-relevant, pooled-unjudged (-1) and unjudged passages."""

import random

import ir_measures
import pytest

from retrieval.errors import InputError
from retrieval.measures import Ranking, parse_measure, parse_measures, split_metric_names

IR_MEASURES_NAMES = [
    "P@1",
    "P@5",
    "R@10",
    "AP",
    "AP@5",
    "nDCG",
    "nDCG@3",
    "RR",
    "RR@3",
    "Success@2",
    "Judged@5",
    "Judged",
    "Rprec",
    "Bpref",
    "infAP",
    "IPrec@0.5",
    "SetP",
    "SetR",
    "SetF",
    "nDCG(judged_only=True)@5",
    "nDCG(judged_only=True)",
    "P(judged_only=True)@5",
    "P(rel=2)@5",
    "AP(rel=2)",
    "RR(rel=2)",
    "Bpref(rel=2)",
    "infAP(rel=2)",
    "Rprec(rel=2)",
    "Success(rel=2)@3",
    "SetF(beta=2.0)",
]
TREC_EVAL_NAMES = [
    "map",
    "map_cut_10",
    "P_5",
    "recall_100",
    "ndcg",
    "ndcg_cut_10",
    "recip_rank",
    "Rprec",
    "bpref",
    "infAP",
    "success_5",
    "iprec_at_recall_0.50",
    "set_P",
    "set_recall",
    "set_F",
]


@pytest.mark.parametrize("name", IR_MEASURES_NAMES)
def test_ir_measures_names_mean_what_ir_measures_means(name):
    assert parse_measure(name).name == str(ir_measures.parse_measure(name))


@pytest.mark.parametrize("name", TREC_EVAL_NAMES)
def test_trec_eval_names_are_aliases_of_the_same_measures(name):
    assert parse_measure(name).name == str(ir_measures.parse_trec_measure(name)[0])


def test_the_projects_names_keep_their_keys_and_name_the_same_measures():
    pairs = {
        "recall@5": ("recall@5", "R@5"),
        "mrr@10": ("mrr@10", "RR@10"),
        "MRR": ("mrr", "RR"),
        "ndcg@10": ("ndcg@10", "nDCG@10"),
        "MAP": ("map", "AP"),
        "map@10": ("map@10", "AP@10"),
        "n_rodcg@10": ("n_rodcg@10", "N-RODCG@10"),
        "N-RODCG@1": ("n_rodcg@1", "N-RODCG@1"),
        "mean_rank": ("mean_rank", "mean_rank"),
        "Judged@10": ("judged@10", "Judged@10"),
        "nDCG(judged_only=True)@10": ("ndcg(judged_only=True)@10", "nDCG(judged_only=True)@10"),
    }
    for written, (key, name) in pairs.items():
        measure = parse_measure(written)
        assert (measure.key, measure.name) == (key, name), written


def test_one_measure_written_twice_counts_once_under_its_first_spelling():
    assert [(name, m.name) for name, m in parse_measures("nDCG@10 ndcg_cut_10 P_5, P@5", ())] == [
        ("nDCG@10", "nDCG@10"),
        ("P_5", "P@5"),
    ]
    assert split_metric_names("P(rel=2,judged_only=True)@5, AP") == ["P(rel=2,judged_only=True)@5", "AP"]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("nDCG@0", "at least 1"),
        ("P", "needs a cutoff"),
        ("Bpref@10", "takes no cutoff"),
        ("IPrec@2", "between 0 and 1"),
        ("IPrec", "recall level"),
        ("Judged(rel=2)@5", "unknown parameter 'rel'"),
        ("P(rel=high)@5", "bad value"),
        ("ndcg_cut", "takes a value"),
        ("map_10", "takes no value"),
        ("NumRet", "unknown metric"),
        ("R@99999999999", "too large"),
    ],
)
def test_bad_names_are_refused_in_one_line_on_the_metrics_field(bad, reason):
    with pytest.raises(InputError, match=reason) as error:
        parse_measure(bad)
    assert error.value.field == "metrics" and "\n" not in str(error.value)


def random_queries(seed: int, count: int) -> dict[str, tuple[dict[str, int], list[str]]]:
    """query -> (qrels, ranking): judgments of -1..3 over a random part of 0-30 documents (some
    queries judged only non-relevant, some relevant documents never returned), rankings of any
    length, including empty ones."""
    rng = random.Random(seed)
    queries = {}
    for number in range(count):
        documents = [f"d{index}" for index in range(rng.randint(1, 30))]
        judged = rng.sample(documents, rng.randint(0, len(documents)))
        qrels = {document: rng.choice([-1, 0, 0, 0, 1, 1, 2, 3]) for document in judged}
        if rng.random() < 0.3:
            qrels["elsewhere"] = rng.choice([1, 2])
        qrels = qrels or {documents[0]: 0}
        queries[f"q{number}"] = (qrels, rng.sample(documents, rng.randint(0, len(documents))))
    return queries


@pytest.mark.parametrize("seed", range(4))
def test_every_measure_equals_ir_measures_per_query(seed):
    queries = random_queries(seed, 60)
    qrels = [ir_measures.Qrel(q, d, r) for q, (judged, _) in queries.items() for d, r in judged.items()]
    # Scores falling with the rank: no ties, so no tie rule is involved.
    run = [
        ir_measures.ScoredDoc(q, d, 100.0 - rank) for q, (_, ranked) in queries.items() for rank, d in enumerate(ranked)
    ]
    measures = [ir_measures.parse_measure(name) for name in IR_MEASURES_NAMES]
    expected = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, run)}
    for query, (judged, ranked) in queries.items():
        ranking = Ranking(judged, ranked)
        for name in IR_MEASURES_NAMES:
            assert ranking.value(parse_measure(name)) == pytest.approx(expected[query, name], abs=1e-12), (query, name)


def test_exact_ranks_beyond_the_stored_hits_equal_ir_measures_on_the_full_ranking():
    """A built-in run stores its top hits and the exact rank of every relevant passage over the
    whole candidate set: rank-only measures equal ir-measures on the full ranking (the gaps
    filled with unjudged passages), and `reaches_past_returned` says which figures needed it."""
    rng = random.Random(5)
    for _ in range(200):
        candidates = [f"c{index}" for index in range(rng.randint(5, 60))]
        qrels = {doc: rng.choice([0, 1, 2]) for doc in rng.sample(candidates, rng.randint(1, 5))}
        if not any(qrels.values()):
            qrels[candidates[0]] = 1
        full = rng.sample(candidates, len(candidates))
        depth = rng.randint(1, len(candidates))
        exact = {doc: full.index(doc) + 1 for doc, relevance in qrels.items() if relevance > 0}
        stored = Ranking(qrels, full[:depth], exact)
        run = [ir_measures.ScoredDoc("q", doc, 100.0 - rank) for rank, doc in enumerate(full)]
        truncated = run[:depth]
        reference_qrels = [ir_measures.Qrel("q", doc, relevance) for doc, relevance in qrels.items()]
        for name in ("R@10", "P@5", "AP", "nDCG", "nDCG@10", "RR", "Success@3", "Rprec", "IPrec@0.5"):
            measure = ir_measures.parse_measure(name)
            on_full = ir_measures.calc_aggregate([measure], reference_qrels, run)[measure]
            on_file = ir_measures.calc_aggregate([measure], reference_qrels, truncated)[measure]
            assert stored.value(parse_measure(name)) == pytest.approx(on_full, abs=1e-12), name
            assert stored.value(parse_measure(name), exact=False) == pytest.approx(on_file, abs=1e-12), name
            if stored.reaches_past_returned(parse_measure(name)) is False:
                assert on_full == pytest.approx(on_file, abs=1e-12), name
        for name in ("Bpref", "Judged@10", "SetP", "nDCG(judged_only=True)@10"):
            measure = ir_measures.parse_measure(name)
            on_file = ir_measures.calc_aggregate([measure], reference_qrels, truncated)[measure]
            assert stored.value(parse_measure(name)) == pytest.approx(on_file, abs=1e-12), name
            assert not stored.reaches_past_returned(parse_measure(name))
