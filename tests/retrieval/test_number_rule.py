"""One rule for numbers on every path in: ASCII digits (an optional sign; reals with a point and an
exponent) within the range the field holds. Python's int() and float() also read other scripts'
digits ('٣' is 3) and underscores ('1_0' is 10), so qrels, runs, upload options, command options
and web answers took them as numbers; the qrels upload stored a relevance of 2**40 and failed
on 2**63 with an OverflowError traceback, though import_beir refuses values outside 32 bits.
Each is now refused with one line naming the file, line and field, and nothing is written. A NUL
in any upload option, file name or command option is refused too (a collection named 'a\\x00b'
was stored)."""

import contextlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from console.tasks import process_upload
from console.uploads import queue_upload
from jobs.models import Job
from retrieval.errors import InputError
from retrieval.input_rules import parse_integer, parse_real
from retrieval.models import Collection, Qrel, Run
from retrieval.services.qrels_import import import_qrels
from retrieval.services.trec_files import parse_trec_run
from tests.factories import (
    api_client,
    make_annotator,
    make_label_collection,
    make_relic_proxy_study,
    make_user,
    next_url,
    submit_url,
    write_beir_folder,
)

pytestmark = pytest.mark.django_db

NOT_NUMBERS = ["٣", "1_0", "１", "3\u0663", "0x10", "1e3", "", "+", " 1"]
OUT_OF_32_BITS = [str(2**63), str(2**40), str(-(2**31) - 1)]


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_an_integer_is_ascii_digits(text):
    with pytest.raises(InputError, match="is not an integer"):
        parse_integer(text, field="rank")


@pytest.mark.parametrize("text", ["٣.٥", "1_0.5", "nan", "inf", "0x1p3", "1,5"])
def test_a_real_is_ascii(text):
    with pytest.raises(InputError, match=r"is not a (finite )?number"):
        parse_real(text, field="score")


def test_ascii_numbers_are_read_as_before():
    assert [parse_integer(text) for text in ("0", "-7", "+12", "007")] == [0, -7, 12, 7]
    assert [parse_real(text) for text in ("1", "-1e-3", ".5", "2.", "1E+2")] == [1.0, -0.001, 0.5, 2.0, 100.0]


@pytest.fixture
def collection():
    return make_label_collection(n_queries=2, n_passages=3)


def qrels_file(tmp_path, relevance: str):
    path = tmp_path / "qrels.txt"
    path.write_text(f"q0 0 d0 1\nq1 0 d1 {relevance}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("relevance", NOT_NUMBERS[:4] + OUT_OF_32_BITS)
def test_the_qrels_import_refuses_what_the_column_cannot_hold_or_is_no_integer(collection, tmp_path, relevance):
    before = Qrel.objects.count()

    with pytest.raises(InputError) as refusal:
        import_qrels(collection, qrels_file(tmp_path, relevance))

    message = str(refusal.value)
    assert message.startswith(f"{tmp_path / 'qrels.txt'}:2: field 'relevance': ") and "\n" not in message
    assert "out of range -2147483648..2147483647" in message or "is not an integer" in message
    assert Qrel.objects.count() == before


@pytest.mark.parametrize("relevance", [str(2**63), str(2**40), "٣"])
def test_the_qrels_upload_job_fails_with_one_line_and_stores_nothing(collection, tmp_path, relevance):
    staff = api_client(make_user("curator", staff=True))
    upload = SimpleUploadedFile("qrels.txt", qrels_file(tmp_path, relevance).read_bytes())
    response = staff.post("/api/uploads/", {"kind": "qrels", "collection": collection.pk, "file": upload})
    before = Qrel.objects.count()

    with contextlib.suppress(InputError):
        process_upload(response.json()["id"])

    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == Job.Status.FAILED
    assert job.error.startswith("InputError: qrels.txt:2: field 'relevance': ") and "\n" not in job.error
    assert "Overflow" not in job.error and Qrel.objects.count() == before


@pytest.mark.parametrize("score", ["٣", "1_0"])
def test_import_beir_refuses_a_score_that_is_no_ascii_integer(tmp_path, score):
    folder = write_beir_folder(
        tmp_path / "beir", [{"_id": "d1", "text": "a"}], [{"_id": "q1", "text": "b"}], [("q1", "d1", score)]
    )

    with pytest.raises(CommandError, match=rf"qrels.tsv:2: field 'score': '{score}' is not an integer"):
        call_command("import_beir", str(folder), "--collection", "beir")

    assert not Collection.objects.exists()


@pytest.mark.parametrize(
    "line, field",
    [
        ("q1 Q0 d1 ٣ 1.5 t", "rank"),
        ("q1 Q0 d1 1_0 1.5 t", "rank"),
        ("q1 Q0 d1 1 1_0.5 t", "score"),
        ("q1 Q0 d1 1 ٣ t", "score"),
    ],
)
def test_a_trec_run_refuses_numbers_that_are_not_ascii(tmp_path, line, field):
    path = tmp_path / "run.trec"
    path.write_text(line + "\n", encoding="utf-8")

    with pytest.raises(InputError, match=rf"run.trec:1: field '{field}': "):
        parse_trec_run(path, label="run.trec")


@pytest.mark.parametrize(
    "command",
    [
        ["retrieve", "--collection", "c", "--retriever", "bm25", "--depth", "٣"],
        ["retrieve", "--collection", "c", "--retriever", "bm25", "--k1", "1_0"],
        ["export_study", "٣"],
        ["export_judgments", "1_0"],
        ["retry_job", "٣"],
        ["retry_job", str(2**63)],
    ],
)
def test_command_options_take_ascii_numbers_only(command):
    with pytest.raises(CommandError, match=r"invalid (int|float|id) value"):
        call_command(*command)
    assert not Run.objects.exists() and not Job.objects.exists()


def test_an_upload_option_id_in_other_digits_names_no_collection(collection, tmp_path):
    staff = api_client(make_user("curator", staff=True))
    upload = SimpleUploadedFile("qrels.txt", b"q0 0 d0 1\n")
    digits = "".join(chr(0x0660 + int(digit)) for digit in str(collection.pk))  # Arabic-Indic digits

    response = staff.post("/api/uploads/", {"kind": "qrels", "collection": digits, "file": upload})

    assert response.status_code == 400
    assert response.json() == {"collection": [f"field 'collection': no collection with id '{digits}'"]}
    assert not Job.objects.exists()


@pytest.mark.parametrize("option", ["title", "author", "name"])
def test_a_nul_in_an_upload_option_is_refused_naming_the_option(option):
    staff = api_client(make_user("curator", staff=True))
    book = SimpleUploadedFile("tale.txt", b"It was a dark night.\n")

    response = staff.post("/api/uploads/", {"kind": "book", "title": "T", option: "a\x00b", "file": book})

    assert response.status_code == 400
    assert response.json() == {option: [f"field '{option}': contains a NUL character (U+0000), which cannot be stored"]}
    assert not Job.objects.exists() and not Collection.objects.exists()


def test_a_nul_in_the_uploaded_file_name_never_reaches_the_job():
    """Django's multipart parser drops non-printable characters from file names; the service
    refuses one that reaches it another way."""
    staff = api_client(make_user("curator", staff=True))
    book = SimpleUploadedFile("a\x00b.txt", b"A night.\n")

    response = staff.post("/api/uploads/", {"kind": "book", "title": "T", "file": book})

    assert response.status_code == 202 and Job.objects.get().parameters["file"] == "ab.txt"
    with pytest.raises(InputError, match="file's name contains a NUL character"):
        queue_upload("book", SimpleUploadedFile("a\x00b.txt", b"A night.\n"), {"title": "T"})


def test_a_web_answer_position_in_other_digits_is_refused():
    study = make_relic_proxy_study(2)
    annotator = api_client(make_annotator("reader"))
    item = annotator.get(next_url(study)).json()["item"]

    for position in ("٠", "0_0"):
        response = annotator.post(submit_url(study), {"item": item, "position": position})
        assert response.status_code == 400, (position, response.content)


@pytest.mark.parametrize(
    "command, option",
    [
        (["import_book", "book.txt", "--title", "a\x00b"], "--title"),
        (["retrieve", "--collection", "c\x00", "--retriever", "bm25"], "--collection"),
        (["import_beir", "folder", "--collection", "x\ud800"], "--collection"),
    ],
)
def test_a_nul_or_a_lone_surrogate_in_a_command_option_is_one_line_naming_it(command, option):
    with pytest.raises(CommandError, match=rf"^{option}: contains a (NUL character|lone surrogate)"):
        call_command(*command)
    assert not Collection.objects.exists()
