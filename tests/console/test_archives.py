"""Uploaded archives cannot escape their folder, plant links or explode: each attack is refused
with one line naming the archive and the entry, and nothing is left written (attack tests)."""

import os
from pathlib import Path

import pytest

from console import archives
from console.archives import Limits
from retrieval.errors import InputError
from tests.console.upload_files import CORPUS, beir_folder, tar_with, zip_folder, zip_with


def named(pack, tmp_path: Path, stem: str) -> Path:
    return tmp_path / (stem + (".zip" if pack is zip_with else ".tar.gz"))


LIMITS = Limits(max_bytes=1_000_000, max_entries=50, max_ratio=100)


def refused(archive: Path, tmp_path: Path, match: str) -> None:
    target = tmp_path / "out"
    with pytest.raises(InputError, match=match) as refusal:
        archives.extract(archive, target, label="upload.zip", limits=LIMITS)
    assert "\n" not in str(refusal.value) and str(refusal.value).startswith("upload.zip: ")
    with pytest.raises(InputError, match=match):
        archives.check(archive, label="upload.zip", limits=LIMITS)
    assert not target.exists()
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/marginalia-evil.txt").exists()


@pytest.mark.parametrize("name", ["../evil.txt", "a/../../evil.txt", "/tmp/marginalia-evil.txt", "C:/evil.txt"])
@pytest.mark.parametrize("pack", [zip_with, tar_with])
def test_entries_that_climb_out_are_refused(tmp_path, pack, name):
    archive = pack(named(pack, tmp_path, "bad"), {"ok.txt": b"fine", name: b"pwned"})
    refused(archive, tmp_path, "would be written outside the upload folder")


@pytest.mark.parametrize("pack", [zip_with, tar_with])
def test_symbolic_links_are_refused(tmp_path, pack):
    archive = pack(named(pack, tmp_path, "link"), {"corpus.jsonl": b"{}"}, symlinks={"queries.jsonl": "/etc/passwd"})
    refused(archive, tmp_path, "entry 'queries.jsonl' is a symbolic link")


def test_a_zip_bomb_is_refused_by_its_ratio(tmp_path):
    archive = zip_with(tmp_path / "bomb.zip", {"corpus.jsonl": b"\0" * 900_000})
    refused(archive, tmp_path, "inflates .* times .*a zip bomb")


def test_an_archive_unpacking_past_the_limit_is_refused(tmp_path):
    noise = os.urandom(512_000)  # does not compress
    archive = zip_with(tmp_path / "big.zip", {"a.bin": noise, "b.bin": noise})
    refused(archive, tmp_path, "unpacks to more than 1000000 bytes")


def test_too_many_entries_are_refused(tmp_path):
    archive = zip_with(tmp_path / "many.zip", {f"f{i}.txt": b"x" for i in range(51)})
    refused(archive, tmp_path, "more than 50 entries")


def test_a_file_that_is_no_archive_is_one_line(tmp_path):
    archive = tmp_path / "fake.zip"
    archive.write_bytes(b"not a zip at all")
    refused(archive, tmp_path, "not a readable archive")


def test_a_lying_header_does_not_get_past_the_byte_count(tmp_path):
    """The declared size says small; the bytes actually written are counted."""
    limits = Limits(max_bytes=1000, max_entries=50, max_ratio=10**9)
    archive = tar_with(tmp_path / "liar.tar.gz", {"a.txt": b"y" * 5000})
    with pytest.raises(InputError, match="unpacks to more than 1000 bytes"):
        archives.extract(archive, tmp_path / "out", label="liar.tar.gz", limits=limits)
    assert not (tmp_path / "out").exists()


def test_a_clean_beir_archive_unpacks(tmp_path):
    archive = zip_folder(beir_folder(tmp_path), tmp_path / "tiny-beir.zip")
    out = archives.extract(archive, tmp_path / "out", limits=LIMITS)
    assert (out / "tiny-beir" / "corpus.jsonl").read_text().count("\n") == len(CORPUS)
