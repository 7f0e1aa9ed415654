"""Candidate sets: a quote is ranked against its book's windows of the gold's length, a BIRCO
query against its own pool, anything else against the whole collection."""

import pytest

from retrieval.models import Collection
from retrieval.services.candidates import candidate_sets
from tests.factories import add_pool, make_book, make_collection, make_text_passages, make_text_query

pytestmark = pytest.mark.django_db

SENTENCES = [f"Sentence number {index}." for index in range(6)]


def external_ids(candidate_set):
    return [passage.external_id for passage in candidate_set.passages()]


def test_quotes_are_ranked_against_their_books_windows_of_the_quote_length_in_start_order():
    collection = make_collection(kind=Collection.Kind.RELIC)
    emma = make_book(collection, SENTENCES, lengths=(1, 2), external_id="emma")
    persuasion = make_book(collection, SENTENCES[:3], lengths=(1, 2), external_id="persuasion")
    first = make_text_query(collection, "", document=emma, quote_length=2, left_context=["Before."])
    other_book = make_text_query(collection, "", document=persuasion, quote_length=2, left_context=["Before."])
    second = make_text_query(collection, "", document=emma, quote_length=2, right_context=["After."])
    single = make_text_query(collection, "", document=emma, quote_length=1, left_context=["Before."])

    sets = candidate_sets(collection)

    assert [set_.queries for set_ in sets] == [[first, second], [other_book], [single]]
    assert external_ids(sets[0]) == [f"emma:{start}:2" for start in range(5)]
    assert external_ids(sets[1]) == ["persuasion:0:2", "persuasion:1:2"]
    assert external_ids(sets[2]) == [f"emma:{start}:1" for start in range(6)]


def test_a_query_with_a_pool_is_ranked_against_its_pool_in_pool_order():
    collection = make_collection()
    passages = make_text_passages(collection, ["a", "b", "c", "d"])
    pooled = make_text_query(collection, "q1")
    other = make_text_query(collection, "q2")
    add_pool(pooled, [passages[2], passages[0], passages[3]])
    add_pool(other, [passages[1], passages[2]])

    sets = candidate_sets(collection)

    assert [set_.queries for set_ in sets] == [[pooled], [other]]
    assert external_ids(sets[0]) == ["d2", "d0", "d3"]
    assert external_ids(sets[1]) == ["d1", "d2"]


def test_other_queries_share_the_whole_collection_in_import_order():
    collection = make_collection()
    passages = make_text_passages(collection, ["a", "b", "c"])
    first, second = make_text_query(collection, "q1"), make_text_query(collection, "q2")
    pooled = make_text_query(collection, "q3")
    add_pool(pooled, [passages[1]])

    sets = candidate_sets(collection)

    assert [set_.queries for set_ in sets] == [[first, second], [pooled]]
    assert external_ids(sets[0]) == ["d0", "d1", "d2"]


def test_sets_can_be_drawn_for_some_queries_only_and_give_passage_values_in_set_order():
    collection = make_collection()
    passages = make_text_passages(collection, ["a", "b", "c"])
    make_text_query(collection, "q1")
    pooled = make_text_query(collection, "q2")
    add_pool(pooled, [passages[2], passages[0]])

    [only] = candidate_sets(collection, [pooled])

    assert only.queries == [pooled]
    assert only.values(["external_id", "pk"]) == [("d2", passages[2].pk), ("d0", passages[0].pk)]


def test_passage_rows_read_like_passages():
    collection = make_collection()
    passage = make_text_passages(collection, ["It is a truth"])[0]
    passage.title = "Pride"
    passage.save()
    make_text_query(collection, "truth")

    [row] = candidate_sets(collection)[0].passages()

    assert (row.pk, row.id, row.collection_id, row.document_id) == (passage.pk, passage.pk, collection.pk, None)
    assert row.retrieval_text == passage.retrieval_text == "Pride It is a truth"
