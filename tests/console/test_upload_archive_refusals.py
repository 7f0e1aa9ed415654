"""Archives that used to get through an upload, or break it, are refused with one line by both
upload paths (/api/uploads/ and the dashboard form), before a job is queued, with nothing kept:
a .tar.gz whose qrels header has a bad checksum (it imported as "succeeded" without its qrels
and pools), entry names that are not UTF-8 (an HTTP 500 on both paths) and the .tar.gz bomb
(1.8 MB that unpacked to 1.85 GB inside the web request)."""

import html
import re
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from console import uploads
from jobs.models import Job
from retrieval.models import Collection
from tests.console.upload_files import (
    beir_folder,
    corrupt_tar_gz,
    latin1_tar_gz,
    tar_gz_of_zeros,
    zip_with_raw_name,
)
from tests.factories import api_client, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_api():
    return api_client(make_user("curator", staff=True))


def as_upload(path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes())


def nothing_kept() -> bool:
    files = [path for path in uploads.upload_folder().rglob("*") if path.is_file()]
    return not files and not Job.objects.exists() and not Collection.objects.exists()


def beir_tar_with_a_corrupt_qrels_header(tmp_path):
    folder = beir_folder(tmp_path)
    entries = {f"tiny-beir/{path.name}": path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}
    assert "tiny-beir/qrels.tsv" in entries
    return corrupt_tar_gz(tmp_path / "tiny-beir.tar.gz", entries, corrupt="tiny-beir/qrels.tsv")


CASES = {
    "corrupt tar header": (
        beir_tar_with_a_corrupt_qrels_header,
        r"tiny-beir.tar.gz: not a readable archive \(a corrupt tar header at byte \d+\)",
    ),
    "tar name not UTF-8": (
        lambda tmp_path: latin1_tar_gz(tmp_path / "latin1.tar.gz", "tiny-beir/caf\u00e9.jsonl"),
        r"latin1.tar.gz: entry 'tiny-beir/caf\\xe9.jsonl': its name is not UTF-8 text",
    ),
    "zip name marked UTF-8, not UTF-8": (
        lambda tmp_path: zip_with_raw_name(tmp_path / "latin1.zip", b"caf\xe9.jsonl"),
        r"latin1.zip: an entry's name is marked UTF-8 but is not UTF-8 text",
    ),
    "tar.gz bomb": (
        lambda tmp_path: tar_gz_of_zeros(tmp_path / "bomb.tar.gz", "corpus.jsonl", 1_850_000_000),
        r"bomb.tar.gz: unpacks to more than \d+ bytes, 200 times its \d+ bytes"
        r" \(MARGINALIA_UPLOAD_MAX_COMPRESSION_RATIO\); a zip bomb\?",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_api_refuses_the_archive_with_one_line_and_keeps_nothing(staff_api, tmp_path, case):
    make, message = CASES[case]
    archive = make(tmp_path)
    started = time.monotonic()

    response = staff_api.post("/api/uploads/", {"kind": "beir", "file": as_upload(archive)}, format="multipart")

    assert response.status_code == 400, response.content
    [line] = response.json()["file"]
    assert "\n" not in line and re.fullmatch(message, line), line
    assert time.monotonic() - started < 10
    assert nothing_kept()


@pytest.mark.parametrize("case", CASES)
def test_the_dashboard_form_shows_the_refusal_as_one_line_and_keeps_nothing(staff_client, tmp_path, case):
    make, message = CASES[case]

    response = staff_client.post(reverse("dashboard-upload"), {"kind": "beir", "file": as_upload(make(tmp_path))})

    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert re.search(message, page) and "Traceback" not in page
    assert nothing_kept()
