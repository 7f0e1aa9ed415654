"""Property-based fuzzing of the importers (hypothesis): a mutated valid file is imported or
refused cleanly, never a traceback, and a refusal writes nothing."""

import json
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.factories import relic_book, retrieval_row_counts, write_beir_folder
from tests.mutations import FUZZ_SETTINGS, assert_clean_outcome, mutated

pytestmark = pytest.mark.django_db

RELIC = json.dumps(
    {
        "lamp": relic_book(
            ["The lamp was lit.", "Nobody came.", "The room stayed dark.", "She waited."],
            {"q1": [["Critics dwell on light."], 1, 1, ["The silence matters."]], "q2": [[], 0, 2, []]},
        )
    },
    indent=1,
).encode()
BOOK = (
    b"*** START OF THE PROJECT GUTENBERG EBOOK LAMP ***\n\nThe lamp was lit; nobody came.\n"
    b'She asked: "Why?" The room stayed dark... Morning came.\n\n*** END OF THE PROJECT GUTENBERG EBOOK LAMP ***\n'
)
BEIR_FILES = ("corpus.jsonl", "queries.jsonl", "qrels.tsv", "pools.jsonl")


@pytest.fixture(scope="module")
def beir_template(tmp_path_factory):
    return write_beir_folder(
        tmp_path_factory.mktemp("beir") / "valid",
        corpus=[{"_id": "d1", "title": "Lamps", "text": "Lamps give light."}, {"_id": 2, "text": "Rivers flood."}],
        queries=[{"_id": "q1", "text": "what gives light"}, {"_id": "q2", "text": "floods"}],
        qrels=[("q1", "d1", 1), ("q2", "2", 0)],
        pools={"q1": ["d1", "2"]},
    )


@FUZZ_SETTINGS
@given(data=mutated(RELIC))
def test_import_relic_refuses_cleanly_or_imports(tmp_path, data):
    path = tmp_path / "relic.json"
    path.write_bytes(data)
    assert_clean_outcome("import_relic", [path, "--collection", "fuzz"], retrieval_row_counts)


@FUZZ_SETTINGS
@given(data=mutated(BOOK))
def test_import_book_refuses_cleanly_or_imports(tmp_path, data):
    path = tmp_path / "lamp.txt"
    path.write_bytes(data)
    assert_clean_outcome("import_book", [path, "--title", "Lamp"], retrieval_row_counts)


@FUZZ_SETTINGS
@given(name=st.sampled_from(BEIR_FILES), mutation=st.data())
def test_import_beir_refuses_cleanly_or_imports(tmp_path, beir_template, name, mutation):
    folder = tmp_path / "beir"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(beir_template, folder)
    (folder / name).write_bytes(mutation.draw(mutated((beir_template / name).read_bytes())))
    assert_clean_outcome("import_beir", [folder, "--collection", "fuzz"], retrieval_row_counts)
