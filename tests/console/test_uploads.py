"""Uploads from the dashboard and /api/uploads/: every kind goes through its importer in a worker
job with progress; refusals are one line (size, kind, name ending, missing option, a bad line
inside the file or the archive) with nothing written and the upload's folder gone; only staff
may upload."""

import contextlib
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Judgment
from console import uploads
from console.tasks import process_upload
from jobs.models import Job
from retrieval.errors import InputError
from retrieval.models import Collection, Qrel, Query, Run
from tests.console.upload_files import CORPUS, beir_folder, tar_folder, zip_folder, zip_with
from tests.factories import (
    api_client,
    make_annotator,
    make_label_collection,
    make_proxy_study,
    make_user,
    relic_book,
    write_relic_file,
)

pytestmark = pytest.mark.django_db

API = "/api/uploads/"


def upload_file(path: Path, name: str | None = None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name or path.name, path.read_bytes())


def post(client, kind: str, file, **options):
    with_file = {"kind": kind, **options, **({"file": file} if file is not None else {})}
    return client.post(API, with_file, format="multipart")


def run_job(response) -> Job:
    """What the worker does with the queued job (the task function, in this process)."""
    job_id = response.json()["id"]
    with contextlib.suppress(InputError):  # the job records it; the worker re-raises it to Celery
        process_upload(job_id)
    return Job.objects.get(pk=job_id)


def nothing_left_on_disk():
    folder = uploads.upload_folder()
    return not folder.exists() or not any(folder.iterdir())


@pytest.fixture
def staff_api():
    return api_client(make_user("curator", staff=True))


@pytest.mark.parametrize("pack, name", [(zip_folder, "tiny-beir.zip"), (tar_folder, "tiny-beir.tar.gz")])
def test_a_beir_archive_becomes_a_collection_through_a_job_with_progress(staff_api, tmp_path, pack, name):
    archive = pack(beir_folder(tmp_path), tmp_path / name)

    response = post(staff_api, "beir", upload_file(archive))

    assert response.status_code == 202
    assert response.json()["kind"] == "upload" and response.json()["status"] == "pending"
    job = run_job(response)
    assert job.status == Job.Status.SUCCEEDED and job.progress == 1.0
    assert job.result == {
        "upload": "beir",
        "file": name,
        "collection": "tiny-beir",
        "queries": 2,
        "passages": 3,
        "qrels": 2,
    }
    collection = Collection.objects.get(name="tiny-beir")
    assert collection.passages.count() == len(CORPUS) and Qrel.objects.filter(query__collection=collection).count() == 2
    assert nothing_left_on_disk()


def test_a_bad_line_inside_the_archive_is_one_line_naming_the_file_inside_it(staff_api, tmp_path):
    folder = beir_folder(tmp_path, corpus=[*CORPUS, {"title": "no id", "text": "x"}])
    response = post(staff_api, "beir", upload_file(zip_folder(folder, tmp_path / "broken.zip")))

    job = run_job(response)

    assert job.status == Job.Status.FAILED
    first_line = job.error.splitlines()[0]
    assert first_line.startswith("InputError: broken.zip/tiny-beir/corpus.jsonl:4: field '_id'")
    assert not Collection.objects.exists() and not Query.objects.exists()
    assert nothing_left_on_disk()


def test_a_book_a_relic_file_qrels_and_judgments_go_through_their_importers(staff_api, tmp_path):
    book = tmp_path / "tale.txt"
    book.write_text("It was a dark night. The wind rose. A door opened.\n\nNobody came in.", encoding="utf-8")
    job = run_job(post(staff_api, "book", upload_file(book), title="A Tale", author="Anon"))
    assert job.status == Job.Status.SUCCEEDED and job.result["collection"] == "A Tale"
    assert job.result["sentences"] == 4

    sentences = [f"Sentence {i} of the book." for i in range(12)]
    relic = write_relic_file(
        tmp_path / "relic.json", {"b1": relic_book(sentences, {"q1": [["Before."], 5, 1, ["After."]]})}
    )
    job = run_job(post(staff_api, "relic", upload_file(relic), name="relic one", split="dev"))
    assert job.status == Job.Status.SUCCEEDED and job.result["queries"] == 1
    assert Query.objects.get(collection__name="relic one").split == "dev"

    collection = make_label_collection(n_queries=2, n_passages=3)
    qrels = tmp_path / "more.qrels"
    qrels.write_text("q0 0 d2 1\nq1 0 d0 0\n")
    job = run_job(post(staff_api, "qrels", upload_file(qrels), collection=collection.pk))
    assert job.status == Job.Status.SUCCEEDED and job.result["qrels"] == 2
    assert Qrel.objects.filter(query__collection=collection).count() == 4

    study = make_proxy_study(gold_positions=[0])
    item = study.items.get()
    answer = {
        "item": item.pk,
        "annotator": "imported-ann",
        "choice": item.candidates.get(position=0).passage.external_id,
    }
    lines = tmp_path / "judgments.jsonl"
    lines.write_text(json.dumps(answer) + "\n")
    job = run_job(post(staff_api, "judgments", upload_file(lines), study=study.pk))
    assert job.status == Job.Status.SUCCEEDED and job.result["imported"] == 1
    assert Judgment.objects.filter(item=item).count() == 1
    assert nothing_left_on_disk()


def test_a_trec_run_from_another_system_becomes_a_named_run_and_a_bad_one_writes_nothing(staff_api, tmp_path):
    collection = make_label_collection(n_queries=2, n_passages=3)
    run_file = tmp_path / "splade.trec"
    run_file.write_text("q0 Q0 d2 1 7.5 splade\nq0 Q0 d0 2 3.0 splade\nq1 Q0 d1 1 2.0 splade\n")
    job = run_job(post(staff_api, "trec_run", upload_file(run_file), collection=collection.pk))
    assert job.status == Job.Status.SUCCEEDED and job.result["hits"] == 3 and job.result["queries"] == 2
    run = Run.objects.get(pk=job.result["run_id"])
    assert run.name == "splade" and run.status == Run.Status.DONE

    bad = tmp_path / "bad.trec"
    bad.write_text("q0 Q0 d2 1 7.5 splade\nq0 Q0 d0 2 NaN splade\n")
    job = run_job(post(staff_api, "trec_run", upload_file(bad), collection=collection.pk, name="broken"))
    assert job.status == Job.Status.FAILED and job.error.splitlines()[0].startswith(
        "InputError: bad.trec:2: field 'score'"
    )
    assert not Run.objects.filter(collection=collection, name="broken").exists()
    assert nothing_left_on_disk()


def test_qrels_with_an_unknown_query_write_nothing(staff_api, tmp_path):
    collection = make_label_collection(n_queries=1, n_passages=2)
    qrels = tmp_path / "bad.txt"
    qrels.write_text("q0 0 d1 1\nnope 0 d0 1\n")
    job = run_job(post(staff_api, "qrels", upload_file(qrels), collection=collection.pk))
    assert job.error.splitlines()[0] == "InputError: bad.txt:2: field 'query-id': unknown query id 'nope'"
    assert Qrel.objects.filter(query__collection=collection).count() == 1


@pytest.mark.parametrize(
    "kind, name, data, options, field, message",
    [
        (
            "poem",
            "a.txt",
            b"x",
            {},
            "kind",
            "unknown upload kind 'poem'; use one of: book, relic, beir, qrels, judgments, trec_run, answers",
        ),
        ("book", "a.pdf", b"x", {"title": "T"}, "file", "a.pdf: a Book (.txt) upload ends in .txt"),
        ("book", "a.txt", b"x", {}, "title", "book title is required for a Book (.txt) upload"),
        ("qrels", "q.txt", b"x", {"collection": "999"}, "collection", "no collection with id '999'"),
        ("judgments", "j.jsonl", b"x", {"study": "abc"}, "study", "no study with id 'abc'"),
    ],
)
def test_refusals_are_one_line_naming_the_field_and_queue_nothing(staff_api, kind, name, data, options, field, message):
    response = post(staff_api, kind, SimpleUploadedFile(name, data), **options)
    assert response.status_code == 400
    assert response.json() == {field: [f"field '{field}': {message}"]}
    assert not Job.objects.exists() and nothing_left_on_disk()


def test_a_file_over_the_size_limit_is_refused_with_the_setting_to_change(staff_api, settings, tmp_path):
    settings.MARGINALIA_UPLOAD_MAX_BYTES = 100
    response = post(staff_api, "book", SimpleUploadedFile("big.txt", b"x" * 101), title="Big")
    assert response.status_code == 400
    assert response.json() == {
        "file": ["field 'file': big.txt is 101 bytes; uploads are limited to 100 bytes (MARGINALIA_UPLOAD_MAX_BYTES)"]
    }
    assert not Job.objects.exists() and nothing_left_on_disk()


def test_an_unsafe_archive_is_refused_before_a_job_is_queued(staff_api, tmp_path):
    archive = zip_with(tmp_path / "evil.zip", {"corpus.jsonl": b"{}", "../../evil.txt": b"pwned"})
    response = post(staff_api, "beir", upload_file(archive))
    assert response.status_code == 400
    assert response.json() == {"file": ["evil.zip: entry '../../evil.txt' would be written outside the upload folder"]}
    assert not Job.objects.exists() and nothing_left_on_disk()


def test_the_api_lists_the_kinds(staff_api):
    kinds = staff_api.get(API).json()["kinds"]
    assert [kind["kind"] for kind in kinds] == ["book", "relic", "beir", "qrels", "judgments", "trec_run", "answers"]
    assert kinds[2]["suffixes"] == [".zip", ".tar.gz", ".tgz"]


def test_the_dashboard_form_queues_an_upload_and_shows_a_refusal_as_one_line(staff_client, tmp_path):
    archive = zip_folder(beir_folder(tmp_path), tmp_path / "tiny-beir.zip")
    response = staff_client.post(
        reverse("dashboard-upload"), {"kind": "beir", "file": upload_file(archive)}, follow=True
    )
    job = Job.objects.get(kind="upload")
    assert (
        f"BEIR folder (.zip / .tar.gz) “tiny-beir.zip” uploaded; importing as job {job.pk}."
        in response.content.decode()
    )
    assert f'data-job="{job.pk}"' in response.content.decode()

    refused = staff_client.post(
        reverse("dashboard-upload"), {"kind": "book", "file": upload_file(archive), "title": "x"}
    )
    assert refused.status_code == 400
    one_line = "field &#x27;file&#x27;: tiny-beir.zip: a Book (.txt) upload ends in .txt"
    assert f'<p class="error upload-error" role="alert">{one_line}</p>' in refused.content.decode()


@pytest.mark.parametrize("who", ["anonymous", "annotator"])
def test_annotators_and_visitors_cannot_upload(client, tmp_path, who):
    book = SimpleUploadedFile("tale.txt", b"One sentence.")
    if who == "annotator":
        client.force_login(make_annotator())
    api = client.post(API, {"kind": "book", "file": book, "title": "T"})
    assert api.status_code in (401, 403)
    form = client.post(reverse("dashboard-upload"), {"kind": "book", "file": book, "title": "T"})
    assert form.status_code == 403 or form["Location"].startswith("/accounts/login/")
    assert client.get(API).status_code in (401, 403)
    assert not Job.objects.exists() and not Collection.objects.exists() and nothing_left_on_disk()


def test_generated_answers_become_an_answers_collection_with_a_run_per_system(staff_api, tmp_path):
    source = make_label_collection(2, 2)
    rows = [{"query": f"q{n}", "system": system, "text": f"{system} on {n}"} for n in range(2) for system in "ab"]
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    job = run_job(post(staff_api, "answers", upload_file(path), collection=source.pk, name="systems"))
    assert job.status == Job.Status.SUCCEEDED and job.result["systems"].keys() == {"a", "b"}
    assert Collection.objects.get(name="systems").kind == Collection.Kind.ANSWERS
    bad = tmp_path / "broken.jsonl"
    bad.write_text(json.dumps({"query": "q0", "system": "c"}) + "\n")
    job = run_job(post(staff_api, "answers", upload_file(bad), collection=source.pk, name="systems"))
    assert job.status == Job.Status.FAILED and job.error.splitlines()[0].startswith(
        "InputError: broken.jsonl:1: field 'text'"
    )
    assert not Run.objects.filter(name="c").exists() and nothing_left_on_disk()
