"""import_relic: RELiC JSON becomes books, candidate windows, one query per quote and its gold."""

import pytest
from django.core.management import CommandError, call_command

from retrieval.models import Collection, Passage, Qrel, Query, Sentence
from retrieval.services.importers import import_relic
from tests.factories import call_json_command, make_collection, relic_book, retrieval_row_counts, write_relic_file

LAMP = ["The lamp was lit.", "Nobody came.", "The room stayed dark.", "She waited.", "Morning came.", "It was over."]
RIVER = ["The river rose.", "The bridge held.", "The town slept.", "Rain fell all night."]


def valid_books() -> dict:
    """Two books: the lamp lists every window; the river lists only some single sentences, and
    its quote's gold (sentence 3) is not among them."""
    return {
        "the_lamp": relic_book(
            LAMP,
            {
                "q1": [["Critics dwell on light.", "Here is the moment:"], 1, 1, ["The silence matters."]],
                "q2": [["Then the ending:"], 3, 2, []],
            },
        ),
        "the_river": relic_book(
            RIVER,
            {"q3": [["The flood is foreshadowed."], 3, 1, ["A second reading confirms it."]]},
            candidates={"1_sentence": [2, 0]},
        ),
    }


@pytest.fixture
def relic_file(tmp_path):
    return write_relic_file(tmp_path / "relic_small.json", valid_books())


@pytest.mark.django_db
class TestImportRelic:
    def test_command_prints_the_contract_summary(self, relic_file):
        summary = call_json_command("import_relic", relic_file, "--collection", "relic")

        assert summary == {"collection": "relic", "books": 2, "queries": 3, "sentences": len(LAMP) + len(RIVER)}

    def test_collection_name_defaults_to_the_file_name(self, relic_file):
        assert import_relic(relic_file)["collection"] == "relic_small"

    def test_each_book_is_a_document_with_its_sentences(self, relic_file):
        import_relic(relic_file, collection_name="relic")

        collection = Collection.objects.get(name="relic")
        assert collection.kind == "relic"
        assert list(collection.documents.values_list("external_id", "title", "ordinal")) == [
            ("the_lamp", "the_lamp", 0),
            ("the_river", "the_river", 1),
        ]
        river = list(Sentence.objects.filter(document__external_id="the_river").values_list("index", "text"))
        assert river == list(enumerate(RIVER))

    def test_listed_candidates_become_windows_and_a_missing_gold_is_added(self, relic_file):
        import_relic(relic_file, collection_name="relic")

        river = Passage.objects.filter(document__external_id="the_river").order_by("ordinal")
        assert [p.external_id for p in river] == ["the_river:2:1", "the_river:0:1", "the_river:3:1"]
        lamp = Passage.objects.filter(document__external_id="the_lamp")
        assert lamp.count() == sum(len(LAMP) - n + 1 for n in range(1, 6))
        window = lamp.get(start=3, length=2)
        assert (window.external_id, window.text) == ("the_lamp:3:2", "She waited. Morning came.")
        ordinals = list(
            Passage.objects.filter(collection__name="relic").order_by("ordinal").values_list("ordinal", flat=True)
        )
        assert ordinals == list(range(len(ordinals)))

    def test_each_quote_is_a_query_with_its_context_and_gold(self, relic_file):
        import_relic(relic_file, collection_name="relic", split="dev")

        query = Query.objects.get(external_id="q1")
        assert query.left_context == ["Critics dwell on light.", "Here is the moment:"]
        assert query.right_context == ["The silence matters."]
        assert (query.document.external_id, query.quote_length, query.split) == ("the_lamp", 1, "dev")
        assert [(q.passage.external_id, q.relevance) for q in query.qrels.all()] == [("the_lamp:1:1", 1)]
        assert {q.query.external_id: q.passage.external_id for q in Qrel.objects.all()} == {
            "q1": "the_lamp:1:1",
            "q2": "the_lamp:3:2",
            "q3": "the_river:3:1",
        }
        assert list(Query.objects.order_by("ordinal").values_list("external_id", flat=True)) == ["q1", "q2", "q3"]


def write_books(change):
    """A case that writes the valid books after `change(books)` has broken them."""

    def write(path):
        books = valid_books()
        change(books)
        return write_relic_file(path, books)

    return write


def write_text(text):
    def write(path):
        path.write_text(text, encoding="utf-8")
        return path

    return write


BAD_RELIC = {
    # name: (write the file at path -> path, fragments the error must contain)
    "invalid-json": (write_text('{\n "the_lamp": {\n   "quotes": {,\n}'), ["{path}:3:", "not valid JSON"]),
    "top-level-array": (write_text('["the_lamp"]'), ["{path}: ", "expected a JSON object of books"]),
    "missing-sentences": (
        write_books(lambda books: books["the_lamp"].pop("sentences")),
        ["{path}: ", "field 'the_lamp.sentences': missing"],
    ),
    "start-out-of-range": (
        write_books(lambda books: books["the_lamp"]["quotes"]["q1"].__setitem__(1, 6)),
        ["field 'the_lamp.quotes.q1[1]'", "out of range 0..5"],
    ),
    "gold-runs-past-the-end": (
        write_books(lambda books: books["the_lamp"]["quotes"]["q2"].__setitem__(1, 5)),
        ["field 'the_lamp.quotes.q2[1]'", "out of range 0..4"],
    ),
    "length-outside-1-5": (
        write_books(lambda books: books["the_lamp"]["quotes"]["q1"].__setitem__(2, 6)),
        ["field 'the_lamp.quotes.q1[2]'", "out of range 1..5"],
    ),
    "candidate-out-of-range": (
        write_books(lambda books: books["the_lamp"]["candidates"]["2_sentence"].__setitem__(1, 5)),
        ["field 'the_lamp.candidates.2_sentence[1]'", "out of range 0..4"],
    ),
    "unknown-candidate-key": (
        write_books(lambda books: books["the_lamp"]["candidates"].__setitem__("6_sentence", [0])),
        ["field 'the_lamp.candidates.6_sentence'", "unknown key"],
    ),
    "non-string-sentence": (
        write_books(lambda books: books["the_river"]["sentences"].__setitem__(2, 17)),
        ["field 'the_river.sentences[2]'", "expected a string, got number"],
    ),
    "malformed-quote": (
        write_books(lambda books: books["the_lamp"]["quotes"].__setitem__("q1", ["left", 1, 1])),
        ["field 'the_lamp.quotes.q1'", "expected [left sentences, start index, length, right sentences]"],
    ),
    "quote-id-repeated-across-books": (
        write_books(lambda books: books["the_river"]["quotes"].__setitem__("q1", [[], 0, 1, []])),
        ["field 'the_river.quotes.q1'", "already used in book 'the_lamp'"],
    ),
    "key-repeated-in-one-object": (
        write_text('{"b": {"quotes": {}, "sentences": ["A."], "sentences": ["B."], "candidates": {}}}'),
        ["{path}: ", "field 'sentences'", "appears twice"],
    ),
    "no-candidates-of-the-quote-length": (
        write_books(lambda books: books["the_river"]["quotes"].__setitem__("q3", [[], 1, 2, []])),
        ["field 'the_river.candidates'", "no '2_sentence' list"],
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", BAD_RELIC, ids=list(BAD_RELIC))
def test_bad_input_names_the_problem_and_writes_nothing(tmp_path, case):
    write, fragments = BAD_RELIC[case]
    path = write(tmp_path / "relic.json")
    before = retrieval_row_counts()

    with pytest.raises(CommandError) as failure:
        call_command("import_relic", str(path))

    for fragment in fragments:
        assert fragment.format(path=path) in str(failure.value)
    assert retrieval_row_counts() == before == dict.fromkeys(before, 0)


@pytest.mark.django_db
def test_an_existing_collection_name_is_refused_and_nothing_is_written(relic_file):
    make_collection("relic")
    before = retrieval_row_counts()

    with pytest.raises(CommandError, match="field 'collection': a collection named 'relic' already exists"):
        call_command("import_relic", str(relic_file), "--collection", "relic")

    assert retrieval_row_counts() == before
