"""Runs: every query ranked against its candidate set, by descending score with ties by passage id
descending (trec_eval's rule), the top `depth` hits stored, and the gold's rank kept exactly even
beyond the depth."""

import io
from types import SimpleNamespace

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from hypothesis import given
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from jobs import progress as job_progress_module
from retrieval.bm25 import tokenize
from retrieval.errors import InputError
from retrieval.models import Collection, Hit, Retriever, Run, RunQuery
from retrieval.ranking import ranks_of, tie_break, top_ranked
from retrieval.services import runs
from retrieval.services.runs import (
    create_run,
    execute_run,
    get_or_create_retriever,
    parse_context,
)
from tests.factories import (
    add_pool,
    add_qrels,
    call_json_command,
    make_book,
    make_collection,
    make_relic_collection,
    make_text_passages,
    make_text_query,
)

TEXTS = [
    "Elizabeth walked to Netherfield through the mud.",
    "Mr Darcy looked at Elizabeth.",
    "The ball at Netherfield.",
    "Jane was ill at Netherfield and Elizabeth walked there.",
    "Lady Catherine disapproved.",
    "Mud on her petticoat, six inches deep.",
]


def bm25_run(collection, **parameters):
    return execute_run(create_run(collection, get_or_create_retriever("bm25"), **parameters))


def stored_ranking(run, query):
    return [(hit.passage.external_id, hit.score) for hit in Hit.objects.filter(run=run, query=query).order_by("rank")]


def reference_ranking(texts, ids, query_text):
    """rank_bm25's scores, sorted as trec_eval sorts: score descending, then id descending."""
    scores = BM25Okapi([tokenize(text) for text in texts], k1=0.5, b=0.9).get_scores(tokenize(query_text))
    order = sorted(range(len(ids)), key=lambda index: (scores[index], ids[index]), reverse=True)
    return [(ids[index], scores[index]) for index in order]


@pytest.mark.django_db
def test_a_bm25_run_stores_rank_bm25s_ranking_and_exact_gold_ranks_beyond_the_depth():
    collection = make_collection()
    passages = make_text_passages(collection, TEXTS)
    query = make_text_query(collection, "Elizabeth walked through the mud to Netherfield")
    add_qrels(query, {passages[4]: 1, passages[5]: 2, passages[0]: 0})

    run = bm25_run(collection, depth=2)

    expected = reference_ranking(TEXTS, [p.external_id for p in passages], query.text)
    assert stored_ranking(run, query) == expected[:2]
    result = RunQuery.objects.get(run=run, query=query)
    ranks = {external_id: rank for rank, (external_id, _) in enumerate(expected, start=1)}
    assert result.relevant_ranks == {str(passages[4].pk): ranks["d4"], str(passages[5].pk): ranks["d5"]}
    assert result.gold_rank == min(ranks["d4"], ranks["d5"]) > 2
    assert result.candidates == len(TEXTS)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE and run.seconds > 0
    # Plain-text queries have no context to trim: the default 4/4 is ignored, and the run says so.
    assert run.parameters == {
        "k1": 0.5,
        "b": 0.9,
        "model": "",
        "context_left": None,
        "context_right": None,
        "depth": 2,
        "warnings": [
            f"context 4/4 ignored: the queries of collection '{run.collection.name}' have no context sentences,"
            " so they are used as they are"
        ],
    }


@pytest.mark.django_db
def test_equal_scores_rank_by_passage_id_descending_in_a_collection_and_in_a_pool():
    collection = make_collection()
    texts = ["same words", "other", "same words", "unrelated", "nothing", "more text", "same words", "x"]
    passages = make_text_passages(collection, texts)
    whole = make_text_query(collection, "words")
    pooled = make_text_query(collection, "words")
    add_pool(pooled, [passages[index] for index in (6, 1, 0, 3, 4, 5, 7)])

    run = bm25_run(collection)

    tied_first = ["d6", "d2", "d0"]
    assert [external_id for external_id, _ in stored_ranking(run, whole)] == [*tied_first, "d7", "d5", "d4", "d3", "d1"]
    assert [external_id for external_id, _ in stored_ranking(run, pooled)] == ["d6", "d0", "d7", "d5", "d4", "d3", "d1"]


@pytest.mark.django_db
def test_quotes_use_the_runs_context_size_and_their_books_windows_only():
    collection = make_collection(kind=Collection.Kind.RELIC)
    sentences = [
        "Netherfield was let at last.",
        "Bingley came with his sisters.",
        "Darcy was proud.",
        "Elizabeth laughed at him.",
        "Mud covered her petticoat.",
    ]
    book = make_book(collection, sentences, lengths=(1, 2), external_id="pp")
    query = make_text_query(
        collection,
        "",
        document=book,
        quote_length=1,
        left_context=["Far left mentions mud.", "Near left mentions Darcy."],
        right_context=["Near right mentions Bingley.", "Far right mentions Netherfield."],
    )
    gold = collection.passages.get(external_id="pp:2:1")
    add_qrels(query, {gold: 1})

    run = bm25_run(collection, context_left=1, context_right=1)

    windows = [f"pp:{start}:1" for start in range(5)]
    expected = reference_ranking(sentences, windows, "Near left mentions Darcy. Near right mentions Bingley.")
    assert stored_ranking(run, query) == expected
    assert RunQuery.objects.get(run=run).gold_rank == 1 + [external_id for external_id, _ in expected].index("pp:2:1")


def three_pools():
    collection = make_collection()
    passages = make_text_passages(collection, TEXTS)
    for number in range(3):
        add_pool(
            make_text_query(collection, f"Elizabeth {number}", external_id=f"q{number}"), passages[number : number + 3]
        )
    return collection


@pytest.mark.django_db
def test_progress_is_reported_per_candidate_set_and_ends_at_one(monkeypatch):
    monkeypatch.setattr(runs, "throttled", lambda progress: progress)
    collection = three_pools()
    reports = []

    execute_run(create_run(collection, get_or_create_retriever("bm25")), lambda f, m: reports.append((f, m)))

    set_starts = [(fraction, message) for fraction, message in reports if message.endswith(")")]
    assert [(round(f, 6), m) for f, m in set_starts] == [
        (0.0, "set 1/3 (pool of query q0)"),
        (round(1 / 3, 6), "set 2/3 (pool of query q1)"),
        (round(2 / 3, 6), "set 3/3 (pool of query q2)"),
    ]
    assert reports[-1][0] == 1.0
    assert [fraction for fraction, _ in reports] == sorted(fraction for fraction, _ in reports)


@pytest.mark.django_db
def test_progress_reports_are_throttled_to_spare_the_job_row(monkeypatch):
    """Each report to a Job is a database write: within one second only the first report and
    the final ones pass (the clock stands still here): the last batch's and the run's end."""
    monkeypatch.setattr(job_progress_module, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    collection = three_pools()
    reports = []

    execute_run(create_run(collection, get_or_create_retriever("bm25")), lambda f, m: reports.append((f, m)))

    assert [fraction for fraction, _ in reports] == [0.0, 1.0, 1.0]


@pytest.mark.django_db
def test_a_failing_run_is_marked_failed_and_keeps_no_hits(monkeypatch):
    collection = make_collection()
    passages = make_text_passages(collection, TEXTS)
    add_pool(make_text_query(collection, "Elizabeth"), passages[:2])
    add_pool(make_text_query(collection, "Darcy"), passages[2:])
    run = create_run(collection, get_or_create_retriever("bm25"))
    scorer = runs.scorer_for(run.retriever)
    calls = []

    class BreaksOnSecondSet:
        mask_token = None
        prepare = scorer.prepare

        def score(self, queries, candidates, progress):
            calls.append(len(candidates))
            if len(calls) == 2:
                raise RuntimeError("disk full")
            return scorer.score(queries, candidates, progress)

    monkeypatch.setattr(runs, "scorer_for", lambda retriever, run_parameters=None: BreaksOnSecondSet())

    with pytest.raises(RuntimeError, match="disk full"):
        execute_run(run)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert not Hit.objects.filter(run=run).exists() and not RunQuery.objects.filter(run=run).exists()


@pytest.mark.django_db
def test_a_run_is_executed_once_only():
    collection = make_collection()
    make_text_passages(collection, TEXTS)
    make_text_query(collection, "Elizabeth")
    run = bm25_run(collection)

    with pytest.raises(InputError, match="is done; only a pending run"):
        execute_run(run)
    assert Hit.objects.filter(run=run).count() == len(TEXTS)


@pytest.mark.django_db
def test_scoring_one_query_per_block_or_all_at_once_stores_the_same_hits_bit_for_bit(monkeypatch):
    """Blocks only bound how many scores are ranked at once: the hits, their exact scores and the
    gold ranks are the same for any block size, and equal rank_bm25's."""
    collection = make_relic_collection(12, book_sentences=300)
    stored = []
    for cells in (1, 10**9):
        monkeypatch.setattr(runs, "MAX_SCORE_CELLS", cells)
        run = bm25_run(collection, context_left=2, context_right=2, depth=50)
        stored.append(
            (
                list(
                    Hit.objects.filter(run=run)
                    .order_by("query_id", "rank")
                    .values_list("query_id", "passage_id", "score")
                ),
                list(RunQuery.objects.filter(run=run).order_by("query_id").values_list("relevant_ranks", "gold_rank")),
            )
        )
    assert stored[0] == stored[1] and len(stored[0][0]) == 12 * 50
    windows = list(collection.passages.order_by("start").values_list("external_id", "text"))
    query = collection.queries.get(external_id="quote3")
    text = " ".join([*query.left_context[-2:], *query.right_context[:2]])
    expected = reference_ranking([text for _, text in windows], [external_id for external_id, _ in windows], text)
    hits = Hit.objects.filter(run=run, query=query).order_by("rank").values_list("passage__external_id", "score")
    assert list(hits) == expected[:50]


@given(
    st.lists(st.lists(st.sampled_from([0.0, 1.0, 2.5, -1.0, 3.0]), min_size=12, max_size=12), max_size=6),
    st.lists(st.text(min_size=1, max_size=3), min_size=12, max_size=12, unique=True),
    st.integers(1, 15),
)
def test_ranking_sorts_each_row_by_score_then_id_descending_cut_at_the_depth(rows, ids, depth):
    scores = np.array(rows, dtype=np.float64).reshape(len(rows), len(ids))
    key = tie_break(ids)

    top = top_ranked(scores, depth, key)

    assert top.shape == (len(rows), min(depth, len(ids)))
    for row, ranked in zip(scores, top):
        full = sorted(range(len(ids)), key=lambda index: (row[index], ids[index]), reverse=True)
        assert ranked.tolist() == full[:depth]
        assert ranks_of(row[None, :], [full], key) == [list(range(1, len(ids) + 1))]


def test_context_is_parsed_as_left_slash_right():
    assert parse_context("4/4") == (4, 4)
    assert parse_context("0/2") == (0, 2)
    for bad in ("4", "a/b", "4/", "-1/2", "1/2/3"):
        with pytest.raises(InputError) as error:
            parse_context(bad)
        assert error.value.field == "context"


@pytest.mark.django_db
def test_bm25_retrievers_are_named_by_their_parameters_and_reused():
    first = get_or_create_retriever("bm25", k1=0.5, b=0.9)
    assert get_or_create_retriever("bm25") == first
    assert first.name == "bm25 k1=0.5 b=0.9" and first.parameters == {"k1": 0.5, "b": 0.9}
    assert get_or_create_retriever("bm25", k1=1.2, b=0.75).name == "bm25 k1=1.2 b=0.75"
    with pytest.raises(InputError) as error:
        get_or_create_retriever("bm25", k1=0.5, b=2)
    assert error.value.field == "b"
    with pytest.raises(InputError):
        get_or_create_retriever("tfidf")


@pytest.mark.django_db
def test_dense_retrievers_are_named_by_model_or_found_by_id_or_name():
    trained = Retriever.objects.create(name="relic-trained", kind=Retriever.Kind.DENSE, model_path="/models/relic")
    assert get_or_create_retriever("dense", model="relic-trained") == trained
    assert get_or_create_retriever("dense", model=str(trained.pk)) == trained
    named = get_or_create_retriever("dense", model="/models/other")
    assert (named.name, named.kind, named.model_path) == ("dense /models/other", "dense", "/models/other")
    assert get_or_create_retriever("dense").name == "dense default"


@pytest.mark.django_db
def test_invalid_run_parameters_are_rejected_naming_the_field():
    collection = make_collection()
    retriever = get_or_create_retriever("bm25")
    for parameters, field in (({"depth": 0}, "depth"), ({"context_left": -1}, "context")):
        with pytest.raises(InputError) as error:
            create_run(collection, retriever, **parameters)
        assert error.value.field == field


@pytest.mark.django_db
def test_retrieve_evaluate_and_export_commands():
    collection = make_collection("austen")
    passages = make_text_passages(collection, TEXTS)
    query = make_text_query(collection, "Jane was ill at Netherfield", external_id="q-jane")
    add_qrels(query, {passages[3]: 1})

    summary = call_json_command("retrieve", "--collection", "austen", "--retriever", "bm25", "--depth", 2)

    assert set(summary) == {"run_id", "queries", "seconds"} and summary["queries"] == 1
    evaluation = call_json_command("evaluate_run", summary["run_id"])
    assert evaluation["metrics"]["recall@1"] == 1.0 and evaluation["metrics"]["mean_rank"] == 1.0
    out = io.StringIO()
    call_command("export_run", summary["run_id"], stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    qid, q0, docid, rank, score, tag = lines[0].split()
    assert (qid, q0, docid, rank, tag) == ("q-jane", "Q0", "d3", "1", f"marginalia-bm25-{summary['run_id']}")
    assert float(score) == Hit.objects.get(run_id=summary["run_id"], rank=1).score


@pytest.mark.django_db
@pytest.mark.parametrize(
    "arguments, field",
    [
        (["--collection", "austen", "--context", "4"], "context"),
        (["--collection", "austen", "--context", "a/b"], "context"),
        (["--collection", "nowhere"], "collection"),
        (["--collection", "austen", "--k1", "-1"], "k1"),
    ],
)
def test_retrieve_rejects_bad_input_in_one_line_naming_the_field(arguments, field):
    make_collection("austen")
    with pytest.raises(CommandError) as error:
        call_command("retrieve", "--retriever", "bm25", *arguments)
    assert f"field '{field}'" in str(error.value) and "\n" not in str(error.value)
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_evaluate_and_export_reject_unknown_runs():
    for command in ("evaluate_run", "export_run"):
        with pytest.raises(CommandError, match="field 'run': no run with id '999'"):
            call_command(command, "999")


@pytest.mark.django_db
def test_a_finished_run_keeps_its_metrics_so_pages_do_not_evaluate_it_again(monkeypatch):
    from retrieval import metrics
    from retrieval.metrics import evaluate_run

    collection = make_collection()
    passages = make_text_passages(collection, TEXTS)
    add_qrels(make_text_query(collection, "Elizabeth walked through the mud"), {passages[0]: 1})
    run = bm25_run(collection, depth=3)
    run.refresh_from_db()

    assert run.metrics == evaluate_run(run, page_coverage=True)  # with the run page's coverage summary
    monkeypatch.setattr(metrics, "evaluate_run", lambda run, **options: pytest.fail("evaluated again"))
    assert metrics.run_metrics(run) == run.metrics
