"""Relevance studies: (query, passage) pairs pooled from runs' top hits and the queries' own
pools, deduplicated, in a seeded order; the schema-driven annotator payload that never leaks
provenance or known answers; labels with spans, rubric and rationale submitted through the queue."""

import json

import pytest

from annotation.models import Item, Judgment, Study
from annotation.selectors import pair_sources, query_display_text
from annotation.services import (
    SubmissionRejected,
    claim_next_item,
    create_relevance_study,
    next_work,
    qrel_label,
    submit_judgment,
)
from retrieval.errors import InputError
from retrieval.models import Run
from tests.factories import (
    add_pool,
    add_qrels,
    make_annotator,
    make_collection,
    make_label_collection,
    make_relic_collection,
    make_scored_run,
    make_text_passages,
    make_text_query,
)

pytestmark = pytest.mark.django_db


def two_runs(collection):
    """Run A ranks q0: d0 d1 d2, q1: d3 d4 d5; run B ranks q0: d2 d0 d5, q1: d3 d1 d0."""
    run_a = make_scored_run(collection, {"q0": {"d0": 3, "d1": 2, "d2": 1}, "q1": {"d3": 3, "d4": 2, "d5": 1}})
    run_b = make_scored_run(collection, {"q0": {"d2": 3, "d0": 2, "d5": 1}, "q1": {"d3": 3, "d1": 2, "d0": 1}})
    return run_a, run_b


def pairs(study) -> list[tuple[str, str]]:
    return [
        (item.query.external_id, item.candidates.get().passage.external_id)
        for item in study.items.select_related("query").order_by("position")
    ]


def create(collection, **settings):
    return create_relevance_study(**{"name": "relevance", "collection": collection, "seed": 1, **settings})


def test_pairs_are_the_union_of_the_runs_top_k_each_pair_once():
    collection = make_label_collection(2)
    run_a, run_b = two_runs(collection)
    creation = create(collection, runs=[run_a, run_b], depth=2)
    assert sorted(pairs(creation.study)) == [
        ("q0", "d0"),
        ("q0", "d1"),
        ("q0", "d2"),
        ("q1", "d1"),
        ("q1", "d3"),
        ("q1", "d4"),
    ]
    assert creation.items == 6 and creation.skipped == []
    study = creation.study
    assert (study.kind, study.judgments_per_item, study.candidates_per_item) == (Study.Kind.RELEVANCE, 3, 1)
    assert study.label_schema["scale"] == "binary"


def test_each_pair_keeps_its_best_source_and_the_study_every_source():
    collection = make_label_collection(2)
    run_a, run_b = two_runs(collection)
    study = create(collection, runs=[run_a, run_b], depth=2).study
    by_pair = dict(zip(pairs(study), study.items.order_by("position")))
    candidates = {pair: item.candidates.get() for pair, item in by_pair.items()}
    best = {pair: (candidate.source_run_id, candidate.source_rank) for pair, candidate in candidates.items()}
    assert best[("q0", "d0")] == (run_a.pk, 1)  # A rank 1 beats B rank 2
    assert best[("q0", "d2")] == (run_b.pk, 1)
    assert best[("q1", "d3")] == (run_a.pk, 1)  # rank 1 in both: the run listed first
    sources = dict(pair_sources(study))
    assert sources[by_pair["q0", "d0"].pk] == [{"run": run_a.pk, "rank": 1}, {"run": run_b.pk, "rank": 2}]
    assert study.parameters["runs"] == [run_a.pk, run_b.pk] and study.parameters["depth"] == 2


def test_the_same_seed_rebuilds_the_same_order_and_another_seed_shuffles_it():
    collection = make_label_collection(2)
    runs = list(two_runs(collection))
    first = pairs(create(collection, runs=runs, depth=3, name="first", seed=5).study)
    again = pairs(create(collection, runs=runs, depth=3, name="again", seed=5).study)
    other = pairs(create(collection, runs=runs, depth=3, name="other", seed=6).study)
    assert first == again
    assert sorted(other) == sorted(first) and other != first


def test_the_order_mixes_queries_rather_than_listing_them_one_by_one():
    collection = make_label_collection(2)
    study = create(collection, runs=list(two_runs(collection)), depth=3, seed=5).study
    queries = [query for query, _ in pairs(study)]
    assert queries != sorted(queries) and queries != sorted(queries, reverse=True)


def test_pairs_may_come_from_the_queries_own_pools():
    collection = make_label_collection(2)
    passages = {p.external_id: p for p in collection.passages.all()}
    q0 = collection.queries.get(external_id="q0")
    add_pool(q0, [passages["d4"], passages["d0"], passages["d5"]])
    run_a, _ = two_runs(collection)
    study = create(collection, runs=[run_a], depth=1, use_pools=True).study
    assert sorted(pairs(study)) == [("q0", "d0"), ("q0", "d4"), ("q0", "d5"), ("q1", "d3")]
    by_item = dict(pair_sources(study))
    sources = {pair: by_item[item.pk] for pair, item in zip(pairs(study), study.items.all())}
    assert sources[("q0", "d0")] == [{"run": run_a.pk, "rank": 1}, {"pool": 1}]
    assert sources[("q0", "d4")] == [{"pool": 0}]


def test_pools_alone_need_no_run_and_queries_without_a_pool_are_skipped():
    collection = make_label_collection(2)
    passages = list(collection.passages.order_by("ordinal"))
    add_pool(collection.queries.get(external_id="q1"), passages[:2])
    creation = create(collection, use_pools=True)
    assert sorted(pairs(creation.study)) == [("q1", "d0"), ("q1", "d1")]
    reasons = [(s.query, s.reason) for s in creation.skipped]
    assert reasons == [("q0", "no passage in the runs' top hits nor in its pool")]
    item = creation.study.items.first()
    assert (item.candidates.get().source_run_id, item.candidates.get().source_rank) == (None, None)


def test_queries_may_be_named_or_sampled():
    collection = make_label_collection(2)
    runs = list(two_runs(collection))
    named = create(collection, runs=runs, depth=1, queries=["q1"], name="named").study
    assert {query for query, _ in pairs(named)} == {"q1"}
    sampled = create(collection, runs=runs, depth=1, n_queries=1, name="sampled").study
    assert len({query for query, _ in pairs(sampled)}) == 1
    assert sampled.parameters["n_queries"] == 1


def test_the_schema_and_judgments_per_item_are_configurable():
    collection = make_label_collection(2)
    study = create(
        collection,
        runs=list(two_runs(collection)),
        judgments_per_item=5,
        label_schema={"scale": "graded-0-2", "spans": "passage", "rubric": [{"name": "quality", "values": [0, 1, 2]}]},
    ).study
    assert study.judgments_per_item == 5
    assert study.label_schema["values"] == [0, 1, 2] and study.label_schema["spans"] == "passage"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({}, "runs"),
        ({"depth": 0, "use_pools": True}, "depth"),
        ({"use_pools": True, "queries": ["nope"]}, "queries"),
        ({"use_pools": True, "n_queries": 0}, "n_queries"),
        ({"use_pools": True, "judgments_per_item": 0}, "judgments_per_item"),
        ({"use_pools": True, "label_schema": {"scale": "1-5"}}, "label_schema.scale"),
        ({"use_pools": True, "label_schema": {"multi_select": True}}, "label_schema.multi_select"),
        ({"use_pools": True, "name": " "}, "name"),
    ],
)
def test_bad_settings_are_refused_naming_the_field_and_nothing_is_written(options, field):
    collection = make_label_collection(2)
    with pytest.raises(InputError) as error:
        create(collection, **options)
    assert error.value.field == field
    assert not Study.objects.exists()


def test_a_run_of_another_collection_or_unfinished_is_refused():
    collection = make_label_collection(2)
    foreign = make_scored_run(make_relic_collection(1), {})
    with pytest.raises(InputError) as error:
        create(collection, runs=[foreign])
    assert error.value.field == "runs"
    pending = make_scored_run(collection, {})
    Run.objects.filter(pk=pending.pk).update(status=Run.Status.RUNNING)
    pending.refresh_from_db()
    with pytest.raises(InputError):
        create(collection, runs=[pending])


def test_no_pair_at_all_is_an_error():
    collection = make_label_collection(2)
    with pytest.raises(InputError) as error:
        create(collection, runs=[make_scored_run(collection, {})])
    assert error.value.field == "queries"


# --- the qrels, for staff ---------------------------------------------------------------------


def test_qrel_label_reads_the_pairs_qrel_on_the_schemas_scale():
    collection = make_label_collection(2)
    passages = {p.external_id: p for p in collection.passages.all()}
    q0 = collection.queries.get(external_id="q0")
    add_qrels(q0, {passages["d1"]: 0, passages["d2"]: 2})
    runs = list(two_runs(collection))
    binary = create(collection, runs=runs, depth=3, name="binary").study
    graded = create(collection, runs=runs, depth=3, name="graded", label_schema={"scale": "graded-0-2"}).study
    for study, expected in ((binary, {"d0": 1, "d1": 0, "d2": 1, "d5": None}), (graded, {"d0": 1, "d1": 0, "d2": 2})):
        items = zip(pairs(study), study.items.all())
        known = {passage: qrel_label(item) for (query, passage), item in items if query == "q0"}
        assert {p: known[p] for p in expected} == expected


# --- what annotators see and submit -------------------------------------------------------------


def relevance_study_with(schema, **settings):
    collection = make_label_collection(2)
    return create(collection, runs=list(two_runs(collection)), depth=2, label_schema=schema, **settings).study


def test_the_payload_asks_the_schemas_question_with_named_values():
    study = relevance_study_with(
        {
            "scale": "graded-0-2",
            "spans": "query",
            "rubric": [{"name": "specificity", "values": [0, 1], "labels": {"0": "broad", "1": "specific"}}],
            "rationale": "optional",
        }
    )
    payload = next_work(study, make_annotator())
    item = Item.objects.get(pk=payload["item"])
    assert payload["kind"] == "relevance"
    assert payload["query_text"] == item.query.text
    assert [c["text"] for c in payload["candidates"]] == [item.candidates.get().passage.text]
    assert payload["question"] == "Is this passage relevant to the query?"
    assert payload["values"] == [
        {"value": 0, "label": "Not relevant"},
        {"value": 1, "label": "Partially relevant"},
        {"value": 2, "label": "Highly relevant"},
    ]
    assert payload["spans"] == {"target": "query", "required": False, "text": item.query.text}
    assert payload["rubric"] == [
        {"name": "specificity", "values": [{"value": 0, "label": "broad"}, {"value": 1, "label": "specific"}]}
    ]
    assert (payload["rationale"], payload["multi_select"]) == ("optional", False)
    assert payload["progress"] == {"done": 0, "total": 6}


def test_a_context_query_is_shown_as_one_text_with_the_quotation_marked():
    collection = make_relic_collection(1)
    query = collection.queries.get()
    text = query_display_text(query, 2, 1)
    assert text == f"{query.left_context[2]} {query.left_context[3]} [...] {query.right_context[0]}"


def test_the_payload_never_shows_provenance_roles_known_answers_or_external_ids():
    study = relevance_study_with({"spans": "passage"})
    _work, gold = study.items.order_by("position")[:2]
    Item.objects.filter(pk=gold.pk).update(role=Item.Role.GOLD, expected_label=1)
    annotator = make_annotator()
    seen = []
    for _ in range(2):
        payload = next_work(study, annotator)
        seen.append(payload)
        submit_judgment(annotator=annotator, item=Item.objects.get(pk=payload["item"]), label=0)
    forbidden = {"role", "expected_label", "is_gold", "source_run", "source_rank", "sources", "external_id"}
    external_ids = {p.external_id for p in study.collection.passages.all()} | {"q0", "q1"}
    for payload in seen:
        text = json.dumps(payload)
        assert not forbidden & set(payload) and not any(f'"{key}"' in text for key in forbidden)
        assert not any(f'"{external_id}"' in text for external_id in external_ids)
        assert "gold" not in text.lower()
    assert set(seen[0]) == set(seen[1])
    assert set(seen[0]["candidates"][0]) == set(seen[1]["candidates"][0]) == {"id", "position", "title", "text"}


def test_a_label_with_a_span_rubric_and_rationale_is_stored_as_validated():
    study = relevance_study_with(
        {
            "scale": "graded-0-2",
            "spans": "passage",
            "rationale": "required",
            "rubric": [{"name": "specificity", "values": [0, 1]}],
        }
    )
    annotator = make_annotator()
    item = claim_next_item(study, annotator).item
    submission = submit_judgment(
        annotator=annotator,
        item=item,
        label="2",
        spans=[{"start": 8, "end": 14}, {"start": 0, "end": 7}],
        rubric={"specificity": 1},
        rationale=" It retells the plot. ",
        seconds=4,
    )
    judgment = Judgment.objects.get(pk=submission.judgment.pk)
    assert submission.created
    assert (judgment.label, judgment.rubric, judgment.rationale) == (2, {"specificity": 1}, "It retells the plot.")
    assert judgment.spans == [{"target": "passage", "start": 0, "end": 7}, {"target": "passage", "start": 8, "end": 14}]
    assert judgment.choice is None and judgment.selections == []


@pytest.mark.parametrize(
    ("answer", "field"),
    [
        ({"label": 3, "rationale": "x"}, "label"),
        ({"label": 1}, "rationale"),
        ({"label": 1, "rationale": "x", "spans": [{"start": 9, "end": 2}]}, "spans[0]"),
        ({"label": 1, "rationale": "x", "rubric": {"novelty": 1}}, "rubric.novelty"),
        ({"position": 0, "rationale": "x"}, "position"),
    ],
)
def test_a_bad_submission_is_rejected_naming_the_field_and_nothing_is_stored(answer, field):
    study = relevance_study_with({"spans": "passage", "rationale": "required"})
    annotator = make_annotator()
    item = claim_next_item(study, annotator).item
    with pytest.raises(SubmissionRejected) as rejected:
        submit_judgment(annotator=annotator, item=item, **answer)
    assert f"field '{field}'" in str(rejected.value) and not rejected.value.conflict
    assert not Judgment.objects.exists()


def test_pooling_runs_of_a_collection_without_qrels_works():
    collection = make_collection()
    passages = make_text_passages(collection, ["one text here", "another text"])
    make_text_query(collection, "what is it", external_id="q0")
    run = make_scored_run(collection, {"q0": {passages[0]: 1.0, passages[1]: 0.5}})
    study = create(collection, runs=[run]).study
    assert sorted(pairs(study)) == [("q0", "d0"), ("q0", "d1")]
    assert all(qrel_label(item) is None for item in study.items.all())
