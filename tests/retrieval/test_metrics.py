"""Retrieval metrics: recall@k, mean rank, MRR@10 and nDCG@10 agree with trec_eval (pytrec_eval);
N-RODCG follows the Plot Retrieval paper's definition; every mean comes with its standard error."""

import math

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.errors import InputError
from retrieval.measures import Ranking, parse_measure
from retrieval.metrics import (
    METRICS,
    CandidatePositions,
    Located,
    QueryOutcome,
    best_rank,
    evaluate_run,
    measures_for,
    n_rodcg_at,
    position,
    rodcg_gain,
    standard_error,
    summarize,
)
from retrieval.models import Collection, Run
from retrieval.selectors import trec_run_lines
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever
from tests.factories import add_qrels, make_book, make_collection, make_query, make_text_passages, make_text_query

# --- hand-worked cases ---------------------------------------------------------------------------


def value(measure: str, judgments: dict, exact_ranks: dict, returned=()) -> float:
    """A measure of one query whose relevant passages sit at `exact_ranks` (judgments by id)."""
    return Ranking(judgments, list(returned), exact_ranks).value(parse_measure(measure))


def test_recall_counts_relevant_passages_in_the_top_k_over_all_relevant_ones():
    # Relevant passages at ranks 2 and 7; a third is not in the candidate set at all.
    judgments = {1: 1, 2: 1, 3: 1}
    assert value("R@1", judgments, {1: 2, 2: 7}) == 0
    assert value("R@5", judgments, {1: 2, 2: 7}) == pytest.approx(1 / 3)
    assert value("R@10", judgments, {1: 2, 2: 7}) == pytest.approx(2 / 3)


def test_mean_rank_uses_the_best_ranked_relevant_passage_or_one_past_the_candidates():
    assert best_rank([12, 3], candidates=50) == 3
    assert best_rank([], candidates=50) == 51


def test_reciprocal_rank_is_cut_at_k():
    assert value("RR@10", {1: 1, 2: 1}, {1: 4, 2: 9}) == 0.25
    assert value("RR@10", {1: 1}, {1: 11}) == 0.0
    assert value("RR@10", {1: 1}, {}) == 0.0


def test_ndcg_uses_relevance_as_gain_and_the_ideal_order_of_all_relevances():
    # Relevance 1 at rank 1, relevance 3 at rank 3; a relevance-2 passage was never ranked.
    dcg = 1 / math.log2(2) + 3 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert value("nDCG@10", {1: 1, 2: 3, 3: 2}, {1: 1, 2: 3}) == pytest.approx(dcg / ideal)
    assert value("nDCG@10", {1: 3}, {1: 11}) == 0.0


def test_a_query_judged_only_non_relevant_scores_zero_and_has_no_mean_rank():
    ranking = Ranking({1: 0, 2: 0}, [1, 2, 3], {})
    outcome = QueryOutcome(ranking=ranking, candidates=3)
    assert outcome.metrics(measures_for("R@5 nDCG@10 MRR@10 AP Bpref")) == dict.fromkeys(
        ("recall@5", "ndcg@10", "mrr@10", "map", "bpref"), 0.0
    )
    assert outcome.value(parse_measure("mean_rank")) is None
    assert outcome.value(parse_measure("Judged@2")) == 1.0


def test_standard_error_is_the_sample_deviation_over_root_n():
    assert standard_error([1.0, 0.0, 0.0, 1.0]) == pytest.approx(np.std([1, 0, 0, 1], ddof=1) / 2)
    assert standard_error([0.5]) is None


# --- N-RODCG (Plot Retrieval, section 3.3) ---------------------------------------------------------


def test_rodcg_gain_is_one_over_distance_plus_one_inside_the_field_of_vision():
    assert [rodcg_gain(d) for d in (0, 1, 2, 4, 4.5, 5, 9)] == [1, 1 / 2, 1 / 3, 1 / 5, 1 / 5.5, 0, 0]


def test_a_window_sits_at_the_mean_of_its_sentence_indexes():
    assert position(10, 1) == 10
    assert position(10, 3) == 11
    assert position(4, 2) == 4.5
    assert position(None, None) is None


def test_n_rodcg_on_a_hand_worked_ranking():
    """One book of 1-sentence windows 0..39, the gold at 10. The model ranks windows 12, 10, 30,
    6, 5 first: d = 2, 0, 20, 4, 5, so f = 1/3, 1, 0, 1/5, 0. The ideal ranking puts the gold
    first, then its neighbours at distance 1, 1, 2, 2, 3, 3, 4, 4."""
    windows = [Located(pk=start, document_id=1, position=float(start)) for start in range(40)]
    gains = CandidatePositions(windows).gains([Located(pk=10, document_id=1, position=10.0)])
    top = [gains.get(pk, 0.0) for pk in (12, 10, 30, 6, 5)]
    assert top == [1 / 3, 1, 0, 1 / 5, 0]
    rodcg = (1 / 3) / math.log2(2) + 1 / math.log2(3) + (1 / 5) / math.log2(5)
    ideal_gains = [1, 1 / 2, 1 / 2, 1 / 3, 1 / 3, 1 / 4, 1 / 4, 1 / 5, 1 / 5]
    ideal = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal_gains, start=1))
    assert sorted(gains.values(), reverse=True) == ideal_gains
    assert n_rodcg_at(top, gains.values(), 10) == pytest.approx(rodcg / ideal)
    # Cut at 1: only the first hit counts, against the gold's own gain of 1.
    assert n_rodcg_at(top, gains.values(), 1) == pytest.approx(1 / 3)


def test_n_rodcg_takes_the_nearest_gold_and_ignores_other_books():
    windows = [
        Located(pk=100 * book + start, document_id=book, position=float(start))
        for book in (1, 2)
        for start in range(20)
    ]
    golds = [Located(pk=103, document_id=1, position=3.0), Located(pk=109, document_id=1, position=9.0)]
    gains = CandidatePositions(windows).gains(golds)
    assert gains[106] == 1 / 4  # three from both golds
    assert gains[108] == 1 / 2  # one from the second gold
    assert not any(pk >= 200 for pk in gains)  # the same positions in another book earn nothing


def test_without_positions_only_the_gold_passages_themselves_earn():
    candidates = [Located(pk=pk, document_id=None, position=None) for pk in range(1, 6)]
    gains = CandidatePositions(candidates).gains([Located(4, None, None), Located(9, None, None)])
    assert gains == {4: 1.0}
    assert n_rodcg_at([0, 1, 0], gains.values(), 10) == pytest.approx(1 / math.log2(3))


# --- against trec_eval ------------------------------------------------------------------------------

RANDOM_QUERY = st.fixed_dictionaries(
    {
        "candidates": st.integers(1, 150),
        "relevances": st.lists(st.integers(0, 3), min_size=1, max_size=6),
        "seed": st.integers(0, 2**32 - 1),
        "outside": st.integers(0, 2),
    }
)


def random_query(spec):
    """A candidate set of distinct random scores (trec_eval breaks ties by document id, we by
    candidate order: distinct scores keep the comparison fair), some judged passages inside it
    and `outside` relevant ones that no ranking can reach."""
    rng = np.random.default_rng(spec["seed"])
    scores = {f"c{i}": float(s) for i, s in enumerate(rng.permutation(spec["candidates"]) + rng.random())}
    judged = rng.choice(spec["candidates"], size=min(len(spec["relevances"]), spec["candidates"]), replace=False)
    qrels = {f"c{i}": relevance for i, relevance in zip(judged, spec["relevances"])}
    qrels.update({f"outside{i}": 1 for i in range(spec["outside"])})
    return scores, qrels


def outcome_for(scores, qrels):
    ranked = sorted(scores, key=lambda doc: -scores[doc])
    rank_of = {doc: rank for rank, doc in enumerate(ranked, start=1)}
    relevant = [doc for doc, relevance in qrels.items() if relevance > 0]
    return QueryOutcome(
        ranking=Ranking(qrels, ranked[:10], {doc: rank_of[doc] for doc in relevant if doc in rank_of}),
        candidates=len(scores),
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(RANDOM_QUERY, min_size=2, max_size=8))
def test_metrics_equal_trec_eval_on_random_runs(specs):
    queries = {f"q{i}": random_query(spec) for i, spec in enumerate(specs)}
    queries = {q: (scores, qrels) for q, (scores, qrels) in queries.items() if any(r > 0 for r in qrels.values())}
    if not queries:
        return
    qrels = {q: judged for q, (_, judged) in queries.items()}
    runs = {q: scores for q, (scores, _) in queries.items()}
    top10 = {q: dict(sorted(scores.items(), key=lambda item: -item[1])[:10]) for q, scores in runs.items()}
    measures = {"recall.1,3,5,10,50,100", "ndcg_cut.10"}
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(runs)
    trec_rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    ours = {q: outcome_for(scores, judged).metrics(measures_for(None)) for q, (scores, judged) in queries.items()}
    for q in queries:
        for k in (1, 3, 5, 10, 50, 100):
            assert ours[q][f"recall@{k}"] == pytest.approx(trec[q][f"recall_{k}"], abs=1e-12)
        assert ours[q]["ndcg@10"] == pytest.approx(trec[q]["ndcg_cut_10"], abs=1e-12)
        assert ours[q]["mrr@10"] == pytest.approx(trec_rr[q]["recip_rank"], abs=1e-12)

    summary = summarize([outcome_for(scores, judged) for scores, judged in queries.values()], measures_for(None))
    recall_5 = [trec[q]["recall_5"] for q in queries]
    assert summary["queries"] == len(queries)
    assert summary["metrics"]["recall@5"] == pytest.approx(np.mean(recall_5), abs=1e-12)
    if len(queries) > 1:
        expected_stderr = np.std(recall_5, ddof=1) / math.sqrt(len(queries))
        assert summary["stderr"]["recall@5"] == pytest.approx(expected_stderr, abs=1e-12)
    else:
        assert summary["stderr"]["recall@5"] is None


# --- a stored run ------------------------------------------------------------------------------------

SENTENCES = [
    "Netherfield Park is let at last.",
    "Bingley is single and rich.",
    "Darcy refuses to dance.",
    "Elizabeth overhears the insult.",
    "Jane falls ill at Netherfield.",
    "Elizabeth walks through the mud.",
    "Collins proposes to Elizabeth.",
    "Charlotte accepts Collins.",
    "Wickham slanders Darcy.",
    "Darcy proposes badly at Hunsford.",
    "Elizabeth reads the letter.",
    "Pemberley is beautiful.",
]


@pytest.mark.django_db
def test_evaluate_run_reports_every_metric_overall_and_by_quote_length():
    collection = make_collection(kind=Collection.Kind.RELIC)
    book = make_book(collection, SENTENCES, lengths=(1, 2), external_id="pp")
    windows = {passage.external_id: passage for passage in collection.passages.all()}
    quotes = [
        ("Darcy will not dance with her.", "pp:2:1", 1),
        ("She walks three miles in the mud.", "pp:5:1", 1),
        ("Darcy's first proposal at Hunsford, and the letter.", "pp:9:2", 2),
    ]
    for number, (context, gold, length) in enumerate(quotes):
        query = make_text_query(
            collection, "", f"quote{number}", document=book, quote_length=length, left_context=[context]
        )
        add_qrels(query, {windows[gold]: 1})
    make_text_query(collection, "", "unjudged", document=book, quote_length=1, left_context=["Pemberley."])
    run = execute_run(create_run(collection, get_or_create_retriever("bm25"), depth=3))

    report = evaluate_run(run)

    assert report["run_id"] == run.pk and report["queries"] == 3 and report["queries_without_judgments"] == 1
    assert set(report["metrics"]) == set(report["stderr"]) == set(METRICS)
    assert set(report["by_quote_length"]) == {"1", "2"}
    assert report["by_quote_length"]["1"]["queries"] == 2 and report["by_quote_length"]["2"]["stderr"]["mrr@10"] is None
    # Each number again from the run's stored ranks and the definitions.
    results = {result.query.external_id: result for result in run.query_results.select_related("query")}
    gold_ranks = [results[f"quote{n}"].gold_rank for n in range(3)]
    assert report["metrics"]["mean_rank"] == pytest.approx(np.mean(gold_ranks))
    assert report["metrics"]["mrr@10"] == pytest.approx(np.mean([1 / r for r in gold_ranks]))
    assert report["metrics"]["recall@1"] == pytest.approx(np.mean([r == 1 for r in gold_ranks]))
    assert report["stderr"]["mean_rank"] == pytest.approx(np.std(gold_ranks, ddof=1) / math.sqrt(3))
    assert report["by_quote_length"]["2"]["metrics"]["mean_rank"] == gold_ranks[2]


@pytest.mark.django_db
def test_n_rodcg_of_a_stored_run_credits_neighbouring_windows():
    """A quote whose gold is window 5; the top hits are windows 5's neighbours, not 5 itself."""
    collection = make_collection(kind=Collection.Kind.RELIC)
    sentences = [f"Plain sentence {index}." for index in range(12)]
    sentences[4] = sentences[6] = "Mud mud mud everywhere."
    book = make_book(collection, sentences, lengths=(1,), external_id="pp")
    query = make_text_query(collection, "", "quote", document=book, quote_length=1, left_context=["mud"])
    add_qrels(query, {collection.passages.get(external_id="pp:5:1"): 1})
    run = execute_run(create_run(collection, get_or_create_retriever("bm25")))
    top = [hit.passage.start for hit in run.hits.filter(query=query).order_by("rank")[:10]]
    assert top[:2] == [6, 4]  # tied: window ids descending, as trec_eval orders ties

    report = evaluate_run(run)

    gains = [1 / (abs(start - 5) + 1) if abs(start - 5) < 5 else 0 for start in top]
    ideal = [1, 1 / 2, 1 / 2, 1 / 3, 1 / 3, 1 / 4, 1 / 4, 1 / 5, 1 / 5]
    expected = sum(g / math.log2(r + 1) for r, g in enumerate(gains, 1)) / sum(
        g / math.log2(r + 1) for r, g in enumerate(ideal, 1)
    )
    assert report["metrics"]["n_rodcg@10"] == pytest.approx(expected)


@pytest.mark.django_db
def test_a_relevant_passage_outside_every_candidate_set_ranks_one_past_the_end():
    collection = make_collection()
    passages = make_text_passages(collection, ["alpha", "beta", "gamma"])
    other = make_collection()
    stray = make_text_passages(other, ["alpha"])[0]
    add_qrels(make_text_query(collection, "alpha"), {stray: 1})
    run = execute_run(create_run(collection, get_or_create_retriever("bm25")))
    assert passages

    report = evaluate_run(run)

    assert report["metrics"]["mean_rank"] == 4 and report["metrics"]["recall@100"] == 0


@pytest.mark.django_db
def test_trec_lines_print_scores_exactly_in_query_and_rank_order():
    collection = make_collection()
    make_text_passages(collection, ["alpha beta", "beta", "gamma delta", "alpha"])
    make_text_query(collection, "beta gamma", "second")
    make_text_query(collection, "alpha", "first")
    run = execute_run(create_run(collection, get_or_create_retriever("bm25"), depth=2))

    lines = list(trec_run_lines(run))

    assert [line.split()[0] for line in lines] == ["second", "second", "first", "first"]
    stored = {
        (hit.query.external_id, hit.passage.external_id): hit.score
        for hit in run.hits.select_related("query", "passage")
    }
    for line in lines:
        qid, _, docid, _rank, score, tag = line.split()
        assert float(score) == stored[(qid, docid)] and tag == run.tag


@pytest.mark.django_db
def test_only_finished_runs_are_evaluated():
    collection = make_collection()
    make_query(collection)
    run = create_run(collection, get_or_create_retriever("bm25"))
    with pytest.raises(InputError) as error:
        evaluate_run(run)
    assert error.value.field == "run" and Run.Status.PENDING in str(error.value)
