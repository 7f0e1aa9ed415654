"""Pools of relevance studies on hand-worked rankings: which pairs each strategy judges under a
budget, move-to-front following Cormack, Palmer & Clarke's rule judgment by judgment, growing a
pool with a new run, and the pool's record of how each pair entered it."""

from fractions import Fraction

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotation.models import Item, Judgment, Pool, PooledPair, PoolHit, Study
from annotation.pooling import MoveToFront, majority_label
from annotation.selectors import pair_sources, pool_pairs, pool_summary
from annotation.services import claim_next_item, create_relevance_study, import_judgments, submit_judgment
from annotation.services.lifecycle import studies_depending_on
from annotation.services.pools import extend_pool
from retrieval.errors import InputError
from retrieval.models import Run
from tests.factories import (
    call_json_command,
    make_annotator,
    make_label_collection,
    make_scored_run,
    write_jsonl,
)

pytestmark = pytest.mark.django_db

# One query, three runs (Cormack et al.'s setting: every run ranks the same topic).
RANKINGS = {
    "A": ["d0", "d1", "d2", "d3"],
    "B": ["d4", "d0", "d5", "d6"],
    "C": ["d7", "d8", "d4", "d9"],
}
RELEVANT = {"d1", "d4", "d8"}
# Move-to-front by hand: every run starts at priority 0 and the first listed (A) has the turn.
# A's d0 is not relevant: A drops to -1, B (0) takes the turn. B's d4 is: B keeps it, passes over
# d0 (judged), its d5 is not: B -1. C's d7 is not: C -1. All at -1: A again, d1 relevant, d2
# not: A -2. B (-1): d6 not, B -2. C (-1): d8 relevant, d4 judged, d9 not: C -2. A (-2): d3 not.
MTF_BY_HAND = [
    ("A", "d0"),
    ("B", "d4"),
    ("B", "d5"),
    ("C", "d7"),
    ("A", "d1"),
    ("A", "d2"),
    ("B", "d6"),
    ("C", "d8"),
    ("C", "d9"),
    ("A", "d3"),
]


def ranked_runs(collection, rankings: dict[str, dict[str, list[str]]]) -> dict[str, Run]:
    """Runs ranking, per query, the listed passages in that order."""
    return {
        name: make_scored_run(
            collection,
            {
                query: {passage: len(order) - rank for rank, passage in enumerate(order)}
                for query, order in per_query.items()
            },
        )
        for name, per_query in rankings.items()
    }


def descending(order: list[str]) -> dict[str, float]:
    return {passage: len(order) - rank for rank, passage in enumerate(order)}


@pytest.fixture
def three_runs():
    collection = make_label_collection(1, 10)
    runs = ranked_runs(collection, {name: {"q0": order} for name, order in RANKINGS.items()})
    return collection, runs


def create(collection, runs, **settings):
    options = {"name": f"pool-{len(Study.objects.all())}", "collection": collection, "runs": runs, "depth": 4}
    return create_relevance_study(**(options | settings))


def judged_passages(study) -> set[str]:
    return set(Item.objects.filter(study=study).values_list("candidates__passage__external_id", flat=True))


def judge_all(study, annotator, relevant: set[str]) -> list[str]:
    """One annotator judges everything the queue gives them, label 1 for the `relevant` passages;
    returns the passages in the order they were judged."""
    order = []
    while (assignment := claim_next_item(study, annotator)) is not None:
        passage = assignment.item.candidates.get().passage.external_id
        submit_judgment(annotator=annotator, item=assignment.item, label=int(passage in relevant))
        order.append(passage)
    return order


def draws(study) -> list[tuple[int, str]]:
    """(run id, passage) of each pair move-to-front drew, in draw order."""
    pairs = PooledPair.objects.filter(pool__study=study, item__isnull=False).order_by("order")
    return list(pairs.values_list("drawn_from_id", "passage__external_id"))


# --- static strategies ---------------------------------------------------------------------------


def test_rrf_judges_pairs_in_fusion_order_until_the_budget(three_runs):
    collection, runs = three_runs
    study = create(collection, list(runs.values()), pool="rrf", budget=4).study
    # 1/61 + 1/62 (d0: A 1, B 2) > 1/61 + 1/63 (d4: B 1, C 3) > 1/61 (d7) > 1/62 (d1 before d8, by id)
    assert judged_passages(study) == {"d0", "d4", "d7", "d1"}
    pairs = pool_pairs(study)
    assert [pair["passage"] for pair in pairs[:6]] == ["d0", "d4", "d7", "d1", "d8", "d2"]
    assert pairs[0]["score"] == pytest.approx(float(Fraction(1, 61) + Fraction(1, 62)), abs=1e-15)
    assert [pair["order"] for pair in pairs] == list(range(1, 11))
    assert {hit["run"] for hit in pairs[0]["hits"]} == {runs["A"].pk, runs["B"].pk}


def test_rbp_weighs_each_rank_by_the_persistence_p(three_runs):
    collection, runs = three_runs
    study = create(collection, list(runs.values()), pool="rbp", rbp_p=0.5, budget=3).study
    # p = 0.5: rank 1 weighs 1/2, rank 2 1/4, rank 3 1/8. d0: 1/2 + 1/4, d4: 1/2 + 1/8, d7: 1/2.
    assert [pair["passage"] for pair in pool_pairs(study)[:3]] == ["d0", "d4", "d7"]
    assert judged_passages(study) == {"d0", "d4", "d7"}
    assert pool_pairs(study)[0]["score"] == 0.75


def test_depth_with_a_budget_judges_every_runs_rank_one_first(three_runs):
    collection, runs = three_runs
    study = create(collection, list(runs.values()), pool="depth", budget=4).study
    # rank 1 of every run (d0, d4, d7), then rank 2s in passage-id order (d0 is judged: d1, d8)
    assert judged_passages(study) == {"d0", "d4", "d7", "d1"}


def test_depth_without_a_budget_is_the_union_of_every_runs_top_k(three_runs):
    collection, runs = three_runs
    creation = create(collection, list(runs.values()), depth=2)
    assert judged_passages(creation.study) == {"d0", "d1", "d4", "d7", "d8"}
    assert "pool" not in creation.summary()  # today's request, today's summary
    budgeted = create(collection, list(runs.values()), depth=2, budget=5).summary()
    assert budgeted["pool"] == {"strategy": "depth", "pairs": 5, "budget": 5, "budget_per_query": None}


def test_a_budget_per_query_takes_each_querys_first_pairs_in_the_order():
    collection = make_label_collection(2, 6)
    runs = ranked_runs(
        collection,
        {"A": {"q0": ["d0", "d1", "d2"], "q1": ["d3", "d4", "d5"]}, "B": {"q0": ["d2", "d1"], "q1": ["d5", "d4"]}},
    )
    study = create(collection, list(runs.values()), pool="rrf", budget_per_query=2, depth=3).study
    pairs = {
        (item.query.external_id, item.candidates.get().passage.external_id)
        for item in study.items.select_related("query")
    }
    # q0: d2 (A 3, B 1) and d1 (A 2, B 2) beat d0 (A 1 only); q1 the same with d5, d4.
    assert pairs == {("q0", "d2"), ("q0", "d1"), ("q1", "d5"), ("q1", "d4")}


def test_the_pool_keeps_every_pair_judged_or_not_with_each_runs_rank(three_runs):
    collection, runs = three_runs
    study = create(collection, list(runs.values()), pool="rrf", budget=2).study
    assert PooledPair.objects.filter(pool__study=study).count() == 10
    assert PooledPair.objects.filter(pool__study=study, item__isnull=False).count() == 2
    d4 = PooledPair.objects.get(pool__study=study, passage__external_id="d4")
    assert sorted(d4.hits.values_list("run_id", "rank")) == sorted([(runs["B"].pk, 1), (runs["C"].pk, 3)])
    sources = dict(pair_sources(study))
    assert sources[d4.item_id] == [{"run": runs["B"].pk, "rank": 1}, {"run": runs["C"].pk, "rank": 3}]
    assert d4.item.candidates.get().source_run_id == runs["B"].pk  # the best source, as before pools


# --- move-to-front -------------------------------------------------------------------------------


def test_move_to_front_follows_the_published_rule_judgment_by_judgment(three_runs):
    collection, runs = three_runs
    creation = create(collection, list(runs.values()), pool="mtf", judgments_per_item=1)
    assert creation.items == 1  # the look-ahead: one pair open before any judgment
    order = judge_all(creation.study, make_annotator(), RELEVANT)
    by_id = {run.pk: name for name, run in runs.items()}
    assert [(by_id[run], passage) for run, passage in draws(creation.study)] == MTF_BY_HAND
    assert order == [passage for _, passage in MTF_BY_HAND]
    summary = pool_summary(creation.study)
    query = creation.study.items.first().query_id
    expected = {"A": -3, "B": -2, "C": -2}
    assert summary["state"]["priorities"] == {f"{query}:{runs[name].pk}": value for name, value in expected.items()}
    assert [(row["turns"], row["relevant_found"]) for row in summary["runs"]] == [(4, 1), (3, 1), (3, 1)]


def test_a_budget_stops_move_to_front_where_the_rule_would_go_on(three_runs):
    collection, runs = three_runs
    study = create(collection, list(runs.values()), pool="mtf", judgments_per_item=1, budget=5).study
    assert judge_all(study, make_annotator(), RELEVANT) == [passage for _, passage in MTF_BY_HAND[:5]]
    assert study.items.count() == 5


def test_an_item_is_relevant_when_its_majority_label_is_and_only_once_complete(three_runs):
    collection, runs = three_runs
    study = create(collection, list(runs.values()), pool="mtf", judgments_per_item=3, budget=3).study
    annotators = [make_annotator() for _ in range(3)]
    first = claim_next_item(study, annotators[0]).item  # A's d0
    for annotator, label in zip(annotators, (1, 1, 0)):
        if annotator is not annotators[0]:
            assert claim_next_item(study, annotator).item == first
        assert PooledPair.objects.get(item=first).decided is None
        submit_judgment(annotator=annotator, item=first, label=label)
    pair = PooledPair.objects.get(item=first)
    assert pair.relevant is True and pair.decided is not None
    # Relevant by majority: A keeps the turn and gives its next pair, d1.
    assert Item.objects.get(study=study, position=1).candidates.get().passage.external_id == "d1"


def test_majority_ties_go_to_the_lower_label():
    assert majority_label([1, 0]) == 0
    assert majority_label([2, 2, 1, 1, 0]) == 1
    assert majority_label([3]) == 3


def test_an_annotator_who_finds_nothing_open_gets_a_pair_drawn_for_them(three_runs):
    collection, runs = three_runs
    study = create(collection, list(runs.values()), pool="mtf", judgments_per_item=1, budget=3).study
    first, second, third, fourth = (make_annotator() for _ in range(4))
    held = [claim_next_item(study, annotator).item for annotator in (first, second, third)]
    # Nothing was judged yet, so the pairs drawn ahead come from A, which holds the turn.
    assert [item.candidates.get().passage.external_id for item in held] == ["d0", "d1", "d2"]
    assert claim_next_item(study, fourth) is None  # the budget is spent
    assert study.items.count() == 3


def test_several_queries_share_each_priority_level_before_a_second_turn():
    collection = make_label_collection(2, 6)
    runs = ranked_runs(
        collection,
        {"A": {"q0": ["d0", "d1"], "q1": ["d3", "d4"]}, "B": {"q0": ["d2", "d1"], "q1": ["d5", "d4"]}},
    )
    study = create(collection, list(runs.values()), pool="mtf", judgments_per_item=1, depth=2).study
    judge_all(study, make_annotator(), relevant=set())
    pairs = PooledPair.objects.filter(pool__study=study).order_by("order")
    queries = list(pairs.values_list("query__external_id", flat=True))
    # Each query's first run (priority 0), then each query's second run (still 0), then level -1.
    first_query = queries[0]
    assert queries[:4] == [first_query, "q1" if first_query == "q0" else "q0"] * 2
    assert len(queries) == 6  # d1 and d4 are found by both runs: six distinct pairs


def test_the_strategy_state_round_trips_through_json():
    strategy = MoveToFront([7, 8], [1, 2])
    source = strategy.next_source({(7, 1), (7, 2), (8, 1)}, {})
    strategy.record(source, relevant=False)
    again = MoveToFront.from_state([7, 8], [1, 2], strategy.state())
    assert (again.priorities, again.turn) == (strategy.priorities, strategy.turn) == ({(7, 1): -1}, None)


def test_imported_judgments_decide_the_items_they_complete(three_runs, tmp_path):
    collection, runs = three_runs
    study = create(collection, list(runs.values()), pool="mtf", judgments_per_item=1, budget=4).study
    item = study.items.get()
    path = write_jsonl(tmp_path / "judgments.jsonl", [{"item": item.pk, "annotator": "imported", "label": 0}])
    import_judgments(study, path)
    assert PooledPair.objects.get(item=item).relevant is False
    assert study.items.count() == 2  # decided: the look-ahead drew the next pair (B's d4)


# --- growing a pool ------------------------------------------------------------------------------


def test_adding_a_run_adds_only_new_pairs_and_keeps_every_judgment(three_runs):
    collection, runs = three_runs
    study = create(collection, [runs["A"], runs["B"]], pool="depth", depth=2).study  # d0 d1 d4
    annotator = make_annotator()
    judge_all(study, annotator, RELEVANT)
    judgments = set(Judgment.objects.filter(item__study=study).values_list("pk", "item_id", "label"))
    extension = extend_pool(study, [runs["C"]])
    assert (extension.pairs_added, extension.pairs_already_pooled, extension.items_added) == (2, 0, 2)
    assert judged_passages(study) == {"d0", "d1", "d4", "d7", "d8"}
    assert judgments <= set(Judgment.objects.filter(item__study=study).values_list("pk", "item_id", "label"))
    assert extension.judged_items == 3 and extension.items == 5
    # The new items are there for annotators; the judged ones are not asked again.
    assert judge_all(study, annotator, RELEVANT) in (["d7", "d8"], ["d8", "d7"])


def test_a_new_run_that_retrieved_pooled_pairs_is_recorded_beside_them(three_runs):
    collection, runs = three_runs
    study = create(collection, [runs["A"], runs["B"]], depth=3).study  # A: d0 d1 d2, B: d4 d0 d5
    extension = extend_pool(study, [runs["C"]])  # C: d7 d8 d4
    assert (extension.pairs_added, extension.pairs_already_pooled) == (2, 1)
    d4 = PooledPair.objects.get(pool__study=study, passage__external_id="d4")
    assert list(d4.hits.values_list("run_id", "rank", "extension")) == [(runs["B"].pk, 1, 0), (runs["C"].pk, 3, 1)]
    assert Pool.objects.get(study=study).runs == [runs["A"].pk, runs["B"].pk, runs["C"].pk]
    assert study.items.count() == 7


def test_a_budgeted_extension_judges_the_new_fusion_order_first(three_runs):
    collection, runs = three_runs
    study = create(collection, [runs["A"]], pool="rrf", budget=2).study  # A's d0, d1
    extension = extend_pool(study, [runs["B"], runs["C"]], budget=2)
    # Over A, B and C the undrawn pairs rank d4 (B 1, C 3), then d7 (C 1).
    assert judged_passages(study) == {"d0", "d1", "d4", "d7"}
    assert extension.budget == 4


def test_a_new_run_joins_move_to_front_at_the_starting_priority(three_runs):
    collection, runs = three_runs
    study = create(collection, [runs["A"], runs["B"]], pool="mtf", judgments_per_item=1, budget=3).study
    annotator = make_annotator()
    judge_all(study, annotator, RELEVANT)  # A: d0 (no) -> B: d4 (yes), d5 (no): both at -1
    extend_pool(study, [runs["C"]], budget=1)
    assert judge_all(study, annotator, RELEVANT) == ["d7"]  # C starts at 0 and takes the turn
    assert Pool.objects.get(study=study).budget == 4


def test_extending_refuses_what_would_change_the_pool_silently(three_runs):
    collection, runs = three_runs
    study = create(collection, [runs["A"]]).study
    with pytest.raises(InputError, match="already in the pool"):
        extend_pool(study, [runs["A"]])
    with pytest.raises(InputError, match="no budget per query to raise"):
        extend_pool(study, [runs["B"]], budget_per_query=2)
    other = ranked_runs(make_label_collection(1, 3), {"X": {"q0": ["d0"]}})["X"]
    with pytest.raises(InputError, match="ranks collection"):
        extend_pool(study, [other])
    assert Pool.objects.get(study=study).runs == [runs["A"].pk] and study.items.count() == 4


def test_a_pooled_run_cannot_be_deleted_while_the_study_stands(three_runs):
    collection, runs = three_runs
    study = create(collection, [runs["A"], runs["B"]], pool="rrf", budget=1).study
    # C's rankings are in the pool though no item it ranks best was judged
    extend_pool(study, [runs["C"]])
    assert studies_depending_on(runs["C"]) == [f"study {study.name!r} uses its rankings"]


# --- the commands --------------------------------------------------------------------------------


def test_create_study_and_extend_study_commands(three_runs):
    collection, runs = three_runs
    created = call_json_command(
        "create_study",
        "--kind",
        "relevance",
        "--collection",
        collection.name,
        "--name",
        "pooled",
        "--runs",
        f"{runs['A'].pk},{runs['B'].pk}",
        "--depth",
        4,
        "--pool",
        "rbp",
        "--rbp-p",
        0.5,
        "--budget",
        3,
    )
    assert created["items"] == 3 and created["pool"]["strategy"] == "rbp" and created["pool"]["pairs"] == 7
    study = Study.objects.get(pk=created["study_id"])
    assert study.parameters | {"pool": "rbp", "budget": 3, "rbp_p": 0.5} == study.parameters
    extended = call_json_command("extend_study", study.pk, "--runs", runs["C"].pk, "--budget", 2)
    assert extended | {"items_added": 2, "items": 5, "budget": 5, "pairs_added": 3} == extended
    assert PoolHit.objects.filter(pair__pool__study=study, extension=1).count() == 4


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--pool", "bm25"], "invalid choice"),
        (["--pool", "rbp", "--rbp-p", "1"], "field 'rbp_p': must be strictly between 0 and 1"),
        (["--budget", "0"], "field 'budget': must be between 1 and 20000"),
        (["--pool", "mtf", "--use-pools"], "field 'use_pools'"),
        (["--pool", "mtf", "--lookahead", "0"], "field 'lookahead'"),
    ],
)
def test_bad_pool_options_are_one_line_and_create_nothing(three_runs, options, message):
    collection, runs = three_runs
    args = ["--kind", "relevance", "--collection", collection.name, "--name", "bad", "--runs", str(runs["A"].pk)]
    with pytest.raises(CommandError) as caught:
        call_command("create_study", *args, *options)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert not Study.objects.exists() and not Pool.objects.exists()


def test_a_pool_option_on_another_kind_of_study_is_refused(three_runs):
    collection, runs = three_runs
    with pytest.raises(CommandError, match="field '--budget': a pool is how a relevance study"):
        call_command(
            "create_study", "--kind", "quotability", "--collection", collection.name, "--name", "q",
            "--runs", str(runs["A"].pk), "--budget", "3",
        )  # fmt: skip


# --- studies made before pools ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_older_relevance_studies_the_depth_pool_they_were_drawn_with():
    before, after = [("annotation", "0006_recruiting_study_grants")], [("annotation", "0007_pooling_pools")]
    MigrationExecutor(connection).migrate(before)
    applied = MigrationExecutor(connection).loader.applied_migrations
    old = MigrationExecutor(connection).loader.project_state(list(applied)).apps
    collection = old.get_model("retrieval", "Collection").objects.create(name="old", kind="beir")
    passage = old.get_model("retrieval", "Passage").objects.create(
        collection=collection, external_id="d0", text="t", ordinal=0
    )
    query = old.get_model("retrieval", "Query").objects.create(
        collection=collection, external_id="q0", text="q", ordinal=0
    )
    retriever = old.get_model("retrieval", "Retriever").objects.create(name="bm25-old", kind="bm25")
    run = old.get_model("retrieval", "Run").objects.create(
        retriever=retriever, collection=collection, status="done", name=""
    )
    study = old.get_model("annotation", "Study").objects.create(
        name="old relevance", kind="relevance", collection=collection, parameters={"runs": [run.pk], "depth": 3}
    )
    item = old.get_model("annotation", "Item").objects.create(study=study, query=query, position=0)
    old.get_model("annotation", "ItemCandidate").objects.create(item=item, passage=passage, position=0)
    sources = {str(item.pk): [{"run": run.pk, "rank": 2}, {"pool": 4}]}
    old.get_model("annotation", "Study").objects.filter(pk=study.pk).update(
        parameters={"runs": [run.pk], "depth": 3, "sources": sources}
    )
    MigrationExecutor(connection).migrate(after)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    study = Study.objects.get(pk=study.pk)
    assert "sources" not in study.parameters and study.parameters["pool"] == "depth"
    assert (study.pool.strategy, study.pool.depth, study.pool.runs) == ("depth", 3, [run.pk])
    assert dict(pair_sources(study)) == {item.pk: [{"run": run.pk, "rank": 2}, {"pool": 4}]}
