"""import_book: a plain-text book becomes sentences and every 1..5-sentence window."""

import pytest
from django.core.management import CommandError, call_command

from jobs.errors import JobCancelled
from retrieval.models import Collection, Passage, Sentence
from retrieval.segmentation import split_sentences
from retrieval.services.importers import import_book
from retrieval.text import strip_gutenberg
from tests.factories import call_json_command, make_collection, retrieval_row_counts

SMALL_BOOK = """\ufeffThe Project Gutenberg EBook of The Lamp, by A. Writer

*** START OF THIS PROJECT GUTENBERG EBOOK THE LAMP ***

Chapter 1

The lamp was lit. Nobody
came; the room stayed dark.

"Who is there?" she asked. Silence...

*** END OF THIS PROJECT GUTENBERG EBOOK THE LAMP ***
Licence text that must not be imported.
"""
SMALL_BOOK_SENTENCES = [
    "Chapter 1",
    "The lamp was lit.",
    "Nobody came;",
    "the room stayed dark.",
    '"Who is there?"',
    "she asked.",
    "Silence...",
]


@pytest.fixture
def book_file(tmp_path):
    path = tmp_path / "the_lamp.txt"
    path.write_text(SMALL_BOOK, encoding="utf-8")
    return path


@pytest.mark.django_db
class TestImportBook:
    def test_command_prints_the_contract_summary(self, book_file):
        summary = call_json_command("import_book", book_file, "--title", "The Lamp", "--author", "A. Writer")

        assert summary == {
            "collection": "The Lamp",
            "sentences": 7,
            "passages": {"1": 7, "2": 6, "3": 5, "4": 4, "5": 3},
        }

    def test_sentences_are_stored_in_order_without_gutenberg_text(self, book_file):
        import_book(book_file, title="The Lamp", author="A. Writer", collection_name="lamp")

        collection = Collection.objects.get(name="lamp")
        document = collection.documents.get()
        assert (collection.kind, document.external_id, document.title, document.author) == (
            "book",
            "the_lamp",
            "The Lamp",
            "A. Writer",
        )
        assert list(Sentence.objects.filter(document=document).values_list("index", "text")) == list(
            enumerate(SMALL_BOOK_SENTENCES)
        )

    def test_every_window_is_a_passage_in_length_then_start_order(self, book_file):
        import_book(book_file, title="The Lamp")

        passages = list(Passage.objects.filter(collection__name="The Lamp").order_by("ordinal"))
        expected = [(start, n) for n in range(1, 6) for start in range(len(SMALL_BOOK_SENTENCES) - n + 1)]
        assert [(p.start, p.length) for p in passages] == expected
        assert [p.ordinal for p in passages] == list(range(len(expected)))
        window = next(p for p in passages if (p.start, p.length) == (1, 3))
        assert window.external_id == "the_lamp:1:3"
        assert window.text == "The lamp was lit. Nobody came; the room stayed dark."
        assert window.document.external_id == "the_lamp"

    def test_a_book_shorter_than_five_sentences_has_no_longer_windows(self, tmp_path):
        path = tmp_path / "short.txt"
        path.write_text("One. Two.", encoding="utf-8")

        summary = import_book(path, title="Short")

        assert summary["passages"] == {"1": 2, "2": 1, "3": 0, "4": 0, "5": 0}

    def test_progress_is_reported_up_to_done(self, book_file):
        reports = []
        import_book(book_file, title="The Lamp", progress=lambda fraction, message: reports.append(fraction))
        assert reports[-1] == 1.0 and reports == sorted(reports)

    def test_a_job_cancelled_while_writing_leaves_nothing_behind(self, book_file):
        def cancel_once_writing(fraction, message):
            if message.endswith("stored"):
                raise JobCancelled("stop")

        with pytest.raises(JobCancelled):
            import_book(book_file, title="The Lamp", progress=cancel_once_writing)

        assert retrieval_row_counts() == dict.fromkeys(retrieval_row_counts(), 0)


def write_bytes(tmp_path, data: bytes):
    path = tmp_path / "book.txt"
    path.write_bytes(data)
    return path


BAD_BOOKS = {
    # name: (make the file -> path, extra command arguments, fragments the error must contain)
    "not-utf8": (
        lambda tmp: write_bytes(tmp, b"Fine.\n\nStill fine.\nBad \xff byte.\n"),
        [],
        ["{path}:4:", "not UTF-8"],
    ),
    "empty-file": (lambda tmp: write_bytes(tmp, b""), [], ["{path}: ", "empty"]),
    "no-sentences": (
        lambda tmp: write_bytes(
            tmp,
            b"*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nLicence.",
        ),
        [],
        ["{path}: ", "no sentences"],
    ),
    "missing-file": (lambda tmp: tmp / "nowhere.txt", [], ["{path}: ", "file not found"]),
    "blank-title": (lambda tmp: write_bytes(tmp, b"A sentence."), ["--title", "  "], ["field 'title'", "required"]),
    "existing-collection": (
        lambda tmp: write_bytes(tmp, b"A sentence."),
        ["--collection", "taken"],
        ["field 'collection'", "'taken' already exists"],
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", BAD_BOOKS, ids=list(BAD_BOOKS))
def test_bad_input_names_the_problem_and_writes_nothing(tmp_path, case):
    make_file, extra_arguments, fragments = BAD_BOOKS[case]
    make_collection("taken")
    path = make_file(tmp_path)
    before = retrieval_row_counts()

    with pytest.raises(CommandError) as failure:
        call_command("import_book", str(path), "--title", "A Title", *extra_arguments)

    for fragment in fragments:
        assert fragment.format(path=path) in str(failure.value)
    assert "\n" not in str(failure.value)
    assert retrieval_row_counts() == before


@pytest.mark.data
@pytest.mark.django_db
def test_pride_and_prejudice(shared_data):
    path = shared_data / "gutenberg" / "pride_and_prejudice.txt"

    summary = import_book(path, title="Pride and Prejudice", author="Jane Austen")

    sentences = list(
        Sentence.objects.filter(document__collection__name="Pride and Prejudice").values_list("text", flat=True)
    )
    assert summary["sentences"] == len(sentences) > 5000
    assert summary["passages"] == {str(n): len(sentences) - n + 1 for n in range(1, 6)}
    assert Passage.objects.filter(collection__name="Pride and Prejudice").count() == sum(summary["passages"].values())
    # The novel's own front matter, then chapter 1; nothing from Project Gutenberg's header or licence.
    assert sentences[:4] == [
        "PRIDE AND PREJUDICE",
        "By Jane Austen",
        "Chapter 1",
        "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
        "must be in want of a wife.",
    ]
    assert sentences[-1].endswith("had been the means of uniting them.")
    assert not [s for s in sentences if "Gutenberg" in s or "eBook" in s or "Produced by" in s]
    assert sentences == split_sentences(strip_gutenberg(path.read_text(encoding="utf-8-sig")))
