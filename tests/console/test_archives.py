"""Uploaded archives cannot escape their folder, plant links or explode: each attack is refused
with one line naming the archive and the entry, and nothing is left written (attack tests). One
budget covers every format and entry size (a .tar.gz bomb and a zip of many small entries were
not counted before); a tar with a corrupt header and names that are not UTF-8 are refused with
one line (before: imported without the entries after the bad header; an HTTP 500)."""

import gzip
import io
import os
import tarfile
import time
from pathlib import Path

import pytest

from console import archives
from console.archives import Limits
from retrieval.errors import InputError
from tests.console.upload_files import (
    CORPUS,
    beir_folder,
    corrupt_tar_gz,
    latin1_tar_gz,
    tar_gz_of_zeros,
    tar_with,
    zip_folder,
    zip_with,
    zip_with_raw_name,
)


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
    refused(archive, tmp_path, r"unpacks to more than 101100 bytes, 100 times its 1011 bytes .*a zip bomb")


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


def test_the_reported_tar_gz_bomb_is_refused_from_its_first_header_with_the_real_limits(tmp_path):
    """1.8 MB of .tar.gz that unpacked to 1.85 GB inside the web request."""
    archive = tar_gz_of_zeros(tmp_path / "bomb.tar.gz", "corpus.jsonl", 1_850_000_000)
    started = time.monotonic()

    with pytest.raises(InputError, match=r"bomb.tar.gz: unpacks to more than \d+ bytes, 200 times its \d+ bytes"):
        archives.check(archive, label="bomb.tar.gz")

    assert time.monotonic() - started < 5 and archive.stat().st_size < 2_000_000


def test_a_tar_gz_bomb_is_refused_by_the_same_budget_while_unpacking(tmp_path):
    archive = tar_with(tmp_path / "bomb.tar.gz", {"ok.txt": b"fine", "corpus.jsonl": b"\0" * 900_000})
    refused(archive, tmp_path, r"unpacks to more than \d+ bytes, 100 times its \d+ bytes .*a zip bomb")


def test_a_zip_of_many_small_entries_is_counted_as_a_whole_with_the_real_limits(tmp_path):
    """Entries of 64 KiB each, every one under the per-entry ratio check that skipped entries of
    64 KiB or less (645 MB got through from 10,000 of them): the whole is over 200 times the
    archive's size."""
    archive = zip_with(tmp_path / "many.zip", {f"part{number}.txt": bytes(65_536) for number in range(300)})

    with pytest.raises(InputError, match=r"many.zip: unpacks to more than \d+ bytes, 200 times its"):
        archives.check(archive, label="many.zip")


def test_a_tar_with_a_bad_header_checksum_is_refused_not_cut_short(tmp_path):
    archive = corrupt_tar_gz(
        tmp_path / "corrupt.tar.gz",
        {"beir/corpus.jsonl": b"{}\n", "beir/queries.jsonl": b"{}\n", "beir/qrels.tsv": b"x\n"},
        corrupt="beir/qrels.tsv",
    )
    refused(archive, tmp_path, r"not a readable archive \(a corrupt tar header at byte 2048\)")


def test_data_after_the_end_of_a_tar_is_refused(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as bundle:
        info = tarfile.TarInfo("a.txt")
        info.size = 4
        bundle.addfile(info, io.BytesIO(b"fine"))
    archive = tmp_path / "appended.tar.gz"
    archive.write_bytes(gzip.compress(raw.getvalue() + b"hidden" + bytes(506)))
    refused(archive, tmp_path, "not a readable archive \\(data after its end")


def test_a_tar_entry_name_that_is_not_utf8_is_refused_with_its_bytes_escaped(tmp_path):
    archive = latin1_tar_gz(tmp_path / "latin1.tar.gz", "caf\u00e9.txt")
    refused(archive, tmp_path, r"entry 'caf\\xe9.txt': its name is not UTF-8 text")


def test_a_zip_entry_name_marked_utf8_that_is_not_is_refused(tmp_path):
    archive = zip_with_raw_name(tmp_path / "latin1.zip", b"caf\xe9.txt")
    refused(archive, tmp_path, "an entry's name is marked UTF-8 but is not UTF-8 text")
