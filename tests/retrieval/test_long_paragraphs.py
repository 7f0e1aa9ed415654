"""A paragraph longer than spaCy's max_length (1,000,000 characters) is segmented, not refused
with a spaCy traceback: two Austen novels whose paragraphs end in single newlines are one
paragraph of 1.17 million characters, and import_book now imports them. The pieces are cut at
spaces and put together before the sentencizer runs, so the sentences are exactly those of the
paragraph segmented whole."""

import re

import pytest

from retrieval import segmentation, text
from retrieval.models import Sentence
from retrieval.segmentation import sentence_pipeline, split_sentences
from tests.factories import call_json_command

pytestmark = pytest.mark.django_db

BLANK_LINES = re.compile(r"\n\s*\n")


def single_newline_paragraphs(*books) -> str:
    """The books' text with every blank line gone: all of it one paragraph."""
    return BLANK_LINES.sub("\n", "\n".join(text.strip_gutenberg(book.read_text(encoding="utf-8")) for book in books))


def test_a_long_paragraph_cut_in_pieces_gives_the_sentences_of_the_whole(shared_data, monkeypatch):
    passage = " ".join(text.paragraphs(single_newline_paragraphs(shared_data / "gutenberg" / "persuasion.txt")))[
        :60_000
    ]
    whole = split_sentences(passage)
    monkeypatch.setattr(sentence_pipeline(), "max_length", 5_000)
    monkeypatch.setattr(segmentation, "PIECE_CHARS", 3_000)

    assert split_sentences(passage) == whole and len(whole) > 300


def test_two_austen_novels_with_single_newline_paragraphs_import(shared_data, tmp_path):
    books = [shared_data / "gutenberg" / "pride_and_prejudice.txt", shared_data / "gutenberg" / "persuasion.txt"]
    combined = single_newline_paragraphs(*books)
    assert max(map(len, text.paragraphs(combined))) > 1_000_000
    path = tmp_path / "two-novels.txt"
    path.write_text(combined, encoding="utf-8")

    summary = call_json_command("import_book", str(path), "--title", "Two novels", "--collection", "austen")

    stored = list(Sentence.objects.order_by("index").values_list("text", flat=True))
    assert summary["sentences"] == len(stored) > 10_000
    assert stored[0].startswith("PRIDE AND PREJUDICE") and stored[-1] == "Finis"
    assert summary["passages"]["5"] == len(stored) - 4
