"""Errors and locations as pages show them: the command line and the API keep `file:line: field
'name': message`; a page says the same in a sentence, and never shows a path of the server."""

import pytest

from retrieval.errors import InputError
from retrieval.wording import without_server_folders


def test_the_command_line_keeps_file_line_and_field():
    error = InputError("is not valid JSON", file="beir.zip/corpus.jsonl", line=3, field="_id")
    assert str(error) == "beir.zip/corpus.jsonl:3: field '_id': is not valid JSON"


@pytest.mark.parametrize(
    "error, labels, sentence",
    [
        (
            InputError("the runs belong to different collections", field="runs"),
            None,
            "Runs: the runs belong to different collections.",
        ),
        (
            InputError("must be between 2 and 20, got 25", field="candidates"),
            {"candidates": "Candidates per item"},
            "Candidates per item must be between 2 and 20, not 25.",
        ),
        (
            InputError("is not valid JSON", file="beir.zip/corpus.jsonl", line=3, field="_id"),
            None,
            "Line 3 of beir.zip/corpus.jsonl: “_id” is not valid JSON.",
        ),
        (InputError("not a readable archive", file="beir.zip"), None, "In beir.zip: not a readable archive."),
        (InputError("a study needs a name", field="name"), None, "Name: a study needs a name."),
        (InputError("no study with id 4"), None, "No study with id 4."),
    ],
)
def test_a_page_says_it_in_a_sentence(error, labels, sentence):
    assert error.for_people(labels) == sentence
    assert "field '" not in sentence


@pytest.mark.parametrize(
    "location, shown",
    [
        ("/srv/marginalia/data/uploads/4f2a/unpacked/scifact", "scifact"),
        ("/home/lab/models/my-encoder/", "my-encoder"),
        ("~/corpora/book.txt", "book.txt"),
        ("./data/relic.json", "relic.json"),
        ("C:\\\\Users\\\\lab\\\\beir.zip", "beir.zip"),
        ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
        ("https://example.org/beir/scifact.zip", "https://example.org/beir/scifact.zip"),
        ("upload tiny-beir.zip", "upload tiny-beir.zip"),
        ("", ""),
    ],
)
def test_a_page_shows_a_server_path_by_its_last_name_only(location, shown):
    assert without_server_folders(location) == shown


def test_a_path_inside_the_data_folder_is_shown_relative_to_it():
    assert without_server_folders("/srv/data/models/v1/model", "/srv/data/") == "models/v1/model"
    assert without_server_folders("/srv/database/x.zip", "/srv/data") == "x.zip"
