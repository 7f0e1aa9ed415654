"""A failed job's `error` is the one-line refusal that staff and the API read: the exception's
type and first line, server paths cut to their last part; the traceback goes to the worker's log
only. Before, every job error carried the full traceback with the server's paths, even for a
one-line refusal of an uploaded file."""

import contextlib
import logging

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from console.tasks import process_upload
from jobs.models import Job
from jobs.services import execute
from retrieval.errors import InputError
from tests.factories import api_client, make_user

pytestmark = pytest.mark.django_db


def failed_job(work) -> Job:
    job = Job.objects.create(kind="test")
    with contextlib.suppress(Exception):
        execute(job.pk, work)
    return Job.objects.get(pk=job.pk)


def test_an_unexpected_error_is_one_line_without_server_paths_and_its_traceback_is_logged(caplog, data_dir):
    missing = data_dir / "uploads" / "3f2a" / "secret-layout" / "corpus.jsonl"

    def work(progress):
        progress(0.1, "reading")
        return missing.open().read()

    with caplog.at_level(logging.ERROR, logger="jobs.services"):
        job = failed_job(work)

    assert job.status == Job.Status.FAILED
    assert job.error == "FileNotFoundError: [Errno 2] No such file or directory: 'corpus.jsonl'"
    assert "Traceback" in caplog.text and str(missing) in caplog.text  # the worker's log keeps it all


def test_a_refusal_is_its_one_line(data_dir):
    def work(progress):
        raise InputError("unknown query id 'q9'", file="x.zip/qrels.tsv", line=4, field="query-id")

    assert failed_job(work).error == "InputError: x.zip/qrels.tsv:4: field 'query-id': unknown query id 'q9'"


def test_a_multi_line_message_keeps_its_first_line():
    def work(progress):
        raise RuntimeError("CUDA error: an illegal memory access\nCUDA kernel errors might be reported later")

    assert failed_job(work).error == "RuntimeError: CUDA error: an illegal memory access"


def test_a_failed_upload_job_shows_staff_no_traceback_and_no_path(data_dir):
    staff = api_client(make_user("curator", staff=True))
    book = SimpleUploadedFile("tale.txt", b"It was a dark night.\n")
    response = staff.post("/api/uploads/", {"kind": "book", "title": "T", "file": book}, format="multipart")
    job = Job.objects.get(pk=response.json()["id"])
    (data_dir / "uploads" / job.parameters["folder"] / "tale.txt").unlink()  # the file vanished

    with contextlib.suppress(Exception):
        process_upload(job.pk)
    shown = staff.get(f"/api/jobs/{job.pk}/").json()["error"]

    assert shown.startswith("InputError: ") or shown.startswith("FileNotFoundError: "), shown
    assert "\n" not in shown and "Traceback" not in shown and str(data_dir) not in shown
