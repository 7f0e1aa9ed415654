"""Quotability studies: the quote-recommendation paper's crowd evaluation (a context becomes an
item only where the model's top paragraph is NOT the gold; that paragraph is judged), any run's
top k, and the pilot where annotators select every quotable paragraph of a source."""

import json

import pytest

from annotation.models import Item, Judgment, Study
from annotation.services import (
    create_quotability_study,
    is_correct,
    next_work,
    qrel_label,
    submit_judgment,
)
from retrieval.errors import InputError
from tests.factories import add_pool, make_annotator, make_quote_collection, make_scored_run

pytestmark = pytest.mark.django_db


def shown(study) -> list[tuple[str, list[str]]]:
    return [
        (item.query.external_id, [c.passage.external_id for c in item.candidates.order_by("position")])
        for item in study.items.select_related("query").order_by("position")
    ]


def model_run(collection):
    """c0's top paragraph is its gold; c1's and c2's are another source's paragraphs."""
    return make_scored_run(
        collection,
        {
            "c0": {"s0:p0": 3, "s1:p1": 2, "s2:p2": 1},
            "c1": {"s0:p3": 3, "s1:p0": 2, "s2:p1": 1},
            "c2": {"s2:p1": 3, "s2:p0": 2, "s1:p1": 1},
        },
    )


def create(collection, **settings):
    return create_quotability_study(**{"name": "quotability", "collection": collection, "seed": 2, **settings})


def test_the_papers_rule_judges_the_top_paragraph_only_where_it_is_not_the_gold():
    collection = make_quote_collection(3)
    run = model_run(collection)
    creation = create(collection, run=run)
    assert sorted(shown(creation.study)) == [("c1", ["s0:p3"]), ("c2", ["s2:p1"])]
    assert [(s.query, s.reason) for s in creation.skipped] == [("c0", f"run {run.pk}'s top paragraph is the gold")]
    for item in creation.study.items.all():
        candidate = item.candidates.get()
        assert (candidate.source_run_id, candidate.source_rank, candidate.is_gold) == (run.pk, 1, False)
    assert creation.study.parameters["selection"] == "top_non_gold"


def test_a_context_without_a_known_gold_cannot_qualify():
    collection = make_quote_collection(3)
    collection.queries.get(external_id="c1").qrels.all().delete()
    run = model_run(collection)
    creation = create(collection, run=run)
    assert {s.query for s in creation.skipped} == {"c0", "c1"} and creation.items == 1
    assert "no gold" in next(s.reason for s in creation.skipped if s.query == "c1")


def test_n_queries_counts_contexts_that_qualify():
    collection = make_quote_collection(3)
    creation = create(collection, run=model_run(collection), n_queries=1)
    assert creation.items == 1


def test_defaults_follow_the_paper():
    collection = make_quote_collection(3)
    study = create(collection, run=model_run(collection)).study
    assert (study.kind, study.judgments_per_item, study.context_right) == (Study.Kind.QUOTABILITY, 5, 0)
    assert study.label_schema["question"] == (
        "Does this paragraph contain an excerpt that would be appropriate to quote in the next sentence?"
    )


def test_top_k_judges_every_paragraph_the_run_put_first():
    collection = make_quote_collection(3)
    study = create(collection, run=model_run(collection), selection="top_k", depth=2).study
    assert sorted(shown(study)) == [
        ("c0", ["s0:p0"]),
        ("c0", ["s1:p1"]),
        ("c1", ["s0:p3"]),
        ("c1", ["s1:p0"]),
        ("c2", ["s2:p0"]),
        ("c2", ["s2:p1"]),
    ]


def test_the_payload_shows_the_article_title_and_left_context_and_an_optional_excerpt_span():
    collection = make_quote_collection(3)
    study = create(collection, run=model_run(collection), label_schema={"spans": "passage"}).study
    annotator = make_annotator()
    payload = next_work(study, annotator)
    item = Item.objects.get(pk=payload["item"])
    query = item.query
    assert payload["query_title"] == query.metadata["title"]
    assert payload["context_left"] == query.left_context and payload["context_right"] == []
    assert payload["values"] == [{"value": 0, "label": "No"}, {"value": 1, "label": "Yes"}]
    paragraph = item.candidates.get().passage.text
    assert payload["spans"] == {"target": "passage", "required": False, "text": paragraph}
    submit_judgment(annotator=annotator, item=item, label=1, spans=[{"start": 0, "end": len(paragraph)}])
    payload = next_work(study, annotator)
    submit_judgment(annotator=annotator, item=Item.objects.get(pk=payload["item"]), label=0)
    assert sorted(Judgment.objects.values_list("label", flat=True)) == [0, 1]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({}, "run"),
        ({"run": "model", "selection": "best"}, "selection"),
        ({"run": "model", "selection": "top_k", "depth": 0}, "depth"),
        ({"label_schema": {"multi_select": True}, "candidates_from": "web"}, "candidates_from"),
        ({"label_schema": {"multi_select": True}, "run": "model"}, "run"),
        ({"run": "model", "judgments_per_item": 51}, "judgments_per_item"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(options, field):
    collection = make_quote_collection(3)
    if options.get("run") == "model":
        options["run"] = model_run(collection)
    with pytest.raises(InputError) as error:
        create(collection, **options)
    assert error.value.field == field
    assert not Study.objects.exists()


# --- the pilot: select every quotable paragraph of the source ----------------------------------


def pilot(collection, **settings):
    return create(collection, label_schema={"multi_select": True}, **settings)


def test_the_pilot_shows_every_paragraph_of_the_gold_source_in_reading_order():
    collection = make_quote_collection(2, paragraphs_per_source=4)
    creation = pilot(collection)
    assert sorted(shown(creation.study)) == [
        ("c0", ["s0:p0", "s0:p1", "s0:p2", "s0:p3"]),
        ("c1", ["s1:p0", "s1:p1", "s1:p2", "s1:p3"]),
    ]
    study = creation.study
    assert study.candidates_per_item == 4 and study.parameters["candidates_from"] == "document"
    assert all(c.source_run_id is None for item in study.items.all() for c in item.candidates.all())


def test_the_pilot_may_show_the_querys_pool_shuffled():
    collection = make_quote_collection(2)
    passages = {p.external_id: p for p in collection.passages.all()}
    pool = ["s0:p0", "s0:p1", "s1:p0", "s1:p2", "s1:p3"]
    add_pool(collection.queries.get(external_id="c0"), [passages[name] for name in pool])
    creation = pilot(collection, candidates_from="pool")
    assert [q for q, _ in shown(creation.study)] == ["c0"]
    ((_, candidates),) = shown(creation.study)
    assert sorted(candidates) == sorted(pool) and candidates != pool
    assert [s.query for s in creation.skipped] == ["c1"]


def test_a_source_too_large_for_one_screen_is_skipped():
    collection = make_quote_collection(1, paragraphs_per_source=51)
    with pytest.raises(InputError) as error:
        pilot(collection)
    assert "51 paragraphs" in str(error.value)


def test_the_pilot_payload_asks_for_a_selection_and_stores_positions():
    collection = make_quote_collection(2)
    study = pilot(collection).study
    annotator = make_annotator()
    payload = next_work(study, annotator)
    assert payload["multi_select"] is True and len(payload["candidates"]) == 4
    assert payload["question"].startswith("Which of these paragraphs")
    assert "gold" not in json.dumps(payload).lower()
    item = Item.objects.get(pk=payload["item"])
    judgment = submit_judgment(annotator=annotator, item=item, selections=[3, 0]).judgment
    assert (judgment.label, judgment.selections) == (None, [0, 3])


def test_the_qrels_give_the_pilots_known_answer_for_gold_items():
    collection = make_quote_collection(2)
    study = pilot(collection).study
    item = study.items.get(query__external_id="c1")
    assert qrel_label(item) == [0]
    Item.objects.filter(pk=item.pk).update(role=Item.Role.GOLD, expected_label=qrel_label(item))
    item.refresh_from_db()
    annotator = make_annotator()
    judgment = None
    while judgment is None or judgment.item_id != item.pk:
        payload = next_work(study, annotator)
        current = Item.objects.get(pk=payload["item"])
        judgment = submit_judgment(annotator=annotator, item=current, selections=[0]).judgment
    assert is_correct(item, judgment) is True
