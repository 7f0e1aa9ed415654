"""Creating proxy studies: which queries become items, which candidates they show, in which
order, and that the same seed rebuilds the same study."""

from collections import Counter

import pytest

from annotation.models import Item, ItemCandidate, Study
from annotation.services import create_proxy_study, next_work
from retrieval.errors import InputError
from retrieval.models import Query
from tests.factories import (
    make_annotator,
    make_collection,
    make_neighbour_run,
    make_passages,
    make_query,
    make_relic_collection,
    make_relic_proxy_study,
    make_run,
    make_scored_run,
)

pytestmark = pytest.mark.django_db


def shown(item: Item) -> list[str]:
    return [c.passage.external_id for c in item.candidates.order_by("position").select_related("passage")]


def gold_of(item: Item) -> str:
    return item.candidates.get(is_gold=True).passage.external_id


def create(collection, run, **settings):
    options = {"name": "a study", "items": collection.queries.count(), "seed": 3, **settings}
    return create_proxy_study(collection=collection, negatives_run=run, **options)


def test_each_item_shows_the_gold_and_the_runs_best_negatives():
    collection = make_relic_collection(4)
    study = create(collection, make_neighbour_run(collection)).study
    assert study.kind == Study.Kind.PROXY and study.items.count() == 4
    for item in study.items.all():
        gold_start = int(gold_of(item).split(":")[1])
        # Nearest windows first; the gold (rank 1 in this run) is not taken again as a negative.
        negatives = {f"book:{gold_start - 1}:1", f"book:{gold_start + 1}:1"}
        assert set(shown(item)) == {gold_of(item), *negatives}
        sources = {c.passage.external_id: (c.source_run_id, c.source_rank) for c in item.candidates.all()}
        assert sources[gold_of(item)] == (None, None)
        assert {sources[n][1] for n in negatives} == {2, 3}
        assert all(sources[n][0] == study.negatives_run_id for n in negatives)


@pytest.mark.parametrize("k", [2, 3, 5, 20])
def test_any_number_of_candidates_from_2_to_20(k):
    collection = make_relic_collection(3, book_sentences=80)
    study = create(collection, make_neighbour_run(collection), candidates=k).study
    for item in study.items.all():
        assert item.candidates.count() == k
        assert item.candidates.filter(is_gold=True).count() == 1
        assert sorted(item.candidates.values_list("position", flat=True)) == list(range(k))


@pytest.mark.parametrize("k", [0, 1, 21])
def test_candidate_counts_outside_2_to_20_are_refused(k):
    collection = make_relic_collection(2)
    with pytest.raises(InputError) as error:
        create(collection, make_neighbour_run(collection), candidates=k)
    assert error.value.field == "candidates"
    assert not Study.objects.exists()


def test_negatives_overlapping_the_gold_sentences_are_skipped():
    collection = make_relic_collection(3, quote_length=3)
    study = create(collection, make_neighbour_run(collection)).study
    for item in study.items.all():
        gold_start = int(gold_of(item).split(":")[1])
        for candidate in item.candidates.filter(is_gold=False):
            start = candidate.passage.start
            assert start + 3 <= gold_start or start >= gold_start + 3, "shares sentences with the gold"
        # The nearest windows that do not overlap: starting 3 before or 3 after the gold.
        assert {c.passage.start for c in item.candidates.filter(is_gold=False)} == {gold_start - 3, gold_start + 3}


def test_overlap_is_by_document_and_sentence_range():
    collection = make_relic_collection(1, quote_length=2, book_sentences=40)
    query = collection.queries.get()
    # ranks: overlapping at the end, touching but not overlapping, overlapping at the start, far
    run = make_scored_run(collection, {query: {"book:11:2": 4, "book:12:2": 3, "book:9:2": 2, "book:30:2": 1}})
    item = create(collection, run).study.items.get()
    assert shown(item).count("book:12:2") == 1 and "book:30:2" in shown(item)
    assert "book:11:2" not in shown(item) and "book:9:2" not in shown(item)


def test_negatives_repeating_the_shown_context_are_skipped():
    collection = make_relic_collection(1, book_sentences=80)
    query = collection.queries.get()
    first, second = make_passages(collection, 2)
    first.text = query.left_context[-1]  # the negative IS a context sentence
    first.save()
    second.text = "A passage that contains " + query.right_context[0] + " and more."
    second.save()
    run = make_scored_run(collection, {query: {first: 9, second: 8, "book:40:1": 7, "book:41:1": 6}})
    item = create(collection, run).study.items.get()
    assert set(shown(item)) == {"book:10:1", "book:40:1", "book:41:1"}


def test_context_outside_the_shown_window_does_not_count():
    collection = make_relic_collection(1, book_sentences=80)
    query = collection.queries.get()
    hidden = make_passages(collection, 1)[0]
    hidden.text = query.left_context[0]  # shown only with L >= 4
    hidden.save()
    run = make_scored_run(collection, {query: {hidden: 9, "book:40:1": 7, "book:41:1": 6}})
    with_l1 = create(collection, run, context_left=1, name="l1").study.items.get()
    with_l4 = create(collection, run, context_left=4, name="l4").study.items.get()
    assert hidden.external_id in shown(with_l1)
    assert hidden.external_id not in shown(with_l4)


def test_duplicate_texts_and_other_relevant_passages_are_skipped():
    collection = make_relic_collection(1, book_sentences=80)
    query = collection.queries.get()
    twin, copy_of_gold = make_passages(collection, 2)
    twin.text = collection.passages.get(external_id="book:40:1").text
    twin.save()
    copy_of_gold.text = "  " + collection.passages.get(external_id="book:10:1").text.upper() + " "
    copy_of_gold.save()
    also_relevant = collection.passages.get(external_id="book:50:1")
    query.qrels.create(passage=also_relevant, relevance=1)
    run = make_scored_run(
        collection, {query: {copy_of_gold: 10, "book:40:1": 9, twin: 8, also_relevant: 7, "book:60:1": 6}}
    )
    item = create(collection, run).study.items.get()
    assert set(shown(item)) == {"book:10:1", "book:40:1", "book:60:1"}


def test_beir_queries_show_their_text_and_shared_sentences_count_as_overlap():
    """BIRCO-style: no sentence positions; the query text is the context."""
    collection = make_collection()
    gold, near_duplicate, echo, plain_a, plain_b = make_passages(collection, 5)
    gold.text = "The first long sentence of the gold passage. The second long sentence of the gold passage."
    near_duplicate.text = "The second long sentence of the gold passage. And then something else entirely."
    echo.text = "A sentence the critic also wrote about the book."
    for passage in (gold, near_duplicate, echo):
        passage.save()
    query = make_query(collection, "q1")
    query.text = "A sentence the critic also wrote about the book. Here: [masked sentence(s)] and more."
    query.save()
    query.qrels.create(passage=gold, relevance=1)
    run = make_scored_run(collection, {query: {near_duplicate: 5, echo: 4, plain_a: 3, plain_b: 2, gold: 1}})
    item = create(collection, run).study.items.get()
    assert set(shown(item)) == {gold.external_id, plain_a.external_id, plain_b.external_id}


def test_queries_without_enough_negatives_are_skipped_and_reported_not_half_built():
    collection = make_relic_collection(3)
    starved = collection.queries.get(external_id="quote1")
    scores = {
        query: (
            {"book:11:1": 1}
            if query == starved
            else {"book:11:1": 2, f"book:{12 + 10 * n}:1": 1, f"book:{13 + 10 * n}:1": 0.5}
        )
        for n, query in enumerate(collection.queries.order_by("ordinal"))
    }
    creation = create(collection, make_scored_run(collection, scores), items=3)
    assert creation.items == 2
    assert [(s.query, s.reason) for s in creation.skipped] == [
        ("quote1", f"run {creation.study.negatives_run_id} has only 1 usable negatives, 2 needed")
    ]
    assert not Item.objects.filter(query=starved).exists()
    assert creation.summary()["skipped"] == 1
    assert creation.study.parameters["skipped"] == [{"query": "quote1", "reason": creation.skipped[0].reason}]


def test_skipped_queries_are_replaced_when_more_queries_qualify():
    collection = make_relic_collection(5)
    run = make_neighbour_run(collection)
    run.hits.filter(query__external_id="quote2").delete()
    creation = create(collection, run, items=4)
    assert creation.items == 4
    assert [s.query for s in creation.skipped] == ["quote2"]


def test_queries_without_gold_are_skipped():
    collection = make_relic_collection(2)
    collection.queries.get(external_id="quote0").qrels.all().delete()
    creation = create(collection, make_neighbour_run(collection))
    assert creation.items == 1
    assert creation.skipped[0].query == "quote0" and "gold" in creation.skipped[0].reason


def test_no_qualifying_query_is_an_error_and_nothing_is_written():
    collection = make_relic_collection(2)
    with pytest.raises(InputError) as error:
        create(collection, make_run(collection))
    assert error.value.field == "items"
    assert not Study.objects.exists() and not Item.objects.exists()


def test_the_sample_is_seeded_and_reproducible():
    collection = make_relic_collection(12)
    run = make_neighbour_run(collection)

    def build(name, seed):
        study = create(collection, run, name=name, items=5, seed=seed).study
        return [(item.query.external_id, shown(item)) for item in study.items.order_by("position")]

    first = build("first", 11)
    assert build("again", 11) == first
    assert build("other seed", 12) != first


def test_item_order_is_seeded_not_the_import_order():
    collection = make_relic_collection(12)
    study = create(collection, make_neighbour_run(collection), seed=5).study
    order = [item.query.ordinal for item in study.items.order_by("position")]
    assert sorted(order) == list(range(12)) and order != list(range(12))


@pytest.mark.parametrize(("n_items", "k"), [(30, 3), (31, 3), (11, 4)])
def test_gold_positions_are_counterbalanced(n_items, k):
    collection = make_relic_collection(n_items)
    study = create(collection, make_neighbour_run(collection), candidates=k).study
    positions = Counter(item.candidates.get(is_gold=True).position for item in study.items.all())
    assert set(positions) == set(range(k))
    assert max(positions.values()) - min(positions.values()) <= 1


def test_gold_positions_and_negative_orders_vary_between_items():
    collection = make_relic_collection(12)
    study = create(collection, make_neighbour_run(collection)).study
    orders = []
    for item in study.items.order_by("position"):
        gold_start = int(gold_of(item).split(":")[1])
        orders.append(tuple(int(c.split(":")[1]) - gold_start for c in shown(item)))
    assert len(set(orders)) > 3  # not one fixed pattern of (before, gold, after)
    gold_sequence = [order.index(0) for order in orders]
    assert gold_sequence not in ([0, 1, 2] * 4, [0] * 12)


def test_every_annotator_sees_the_stored_order():
    study = make_relic_proxy_study(1)
    item = study.items.get()
    seen = [[c["text"] for c in next_work(study, make_annotator())["candidates"]] for _ in range(3)]
    stored = [c.passage.text for c in item.candidates.order_by("position").select_related("passage")]
    assert seen == [stored] * 3


def test_candidate_primary_keys_follow_display_order_so_they_do_not_reveal_the_gold():
    collection = make_relic_collection(30, book_sentences=320)
    study = create(collection, make_neighbour_run(collection)).study
    gold_has_lowest_pk = 0
    for item in study.items.all():
        by_pk = list(item.candidates.order_by("pk"))
        assert [c.position for c in by_pk] == [0, 1, 2]
        gold_has_lowest_pk += by_pk[0].is_gold
    assert 0 < gold_has_lowest_pk < 30


def test_single_sentence_and_book_filters():
    collection = make_relic_collection(4)
    Query.objects.filter(external_id__in=["quote0", "quote1"]).update(quote_length=2)
    creation = create(collection, make_neighbour_run(collection), single_sentence=True, items=4)
    assert {i.query.external_id for i in creation.study.items.all()} == {"quote2", "quote3"}

    other = make_relic_collection(1)
    with pytest.raises(InputError) as error:
        create(collection, make_neighbour_run(collection), book=other.documents.get(), name="wrong book")
    assert error.value.field == "book"
    book = collection.documents.get()
    study = create(collection, make_neighbour_run(collection), book=book, name="one book").study
    assert study.items.count() == 4 and study.parameters["book"] == "book"


def test_settings_are_stored_on_the_study():
    study = make_relic_proxy_study(
        3,
        candidates=2,
        judgments_per_item=5,
        context_left=2,
        context_right=1,
        guidelines="Pick the quote.",
        claim_minutes=12,
    )
    assert (study.candidates_per_item, study.judgments_per_item, study.context_left, study.context_right) == (
        2,
        5,
        2,
        1,
    )
    assert (study.guidelines, study.claim_minutes, study.seed) == ("Pick the quote.", 12, 7)


def test_a_run_of_another_collection_or_an_unfinished_run_is_refused():
    collection = make_relic_collection(2)
    other = make_relic_collection(2)
    with pytest.raises(InputError) as error:
        create(collection, make_neighbour_run(other))
    assert error.value.field == "negatives_run"
    run = make_neighbour_run(collection)
    run.status = run.Status.RUNNING
    run.save()
    with pytest.raises(InputError):
        create(collection, run)


def test_names_are_unique():
    collection = make_relic_collection(2)
    run = make_neighbour_run(collection)
    create(collection, run, name="once")
    with pytest.raises(InputError) as error:
        create(collection, run, name="once")
    assert error.value.field == "name"
    assert ItemCandidate.objects.count() == 2 * 3
