"""Unpacking uploaded archives (.zip, .tar.gz / .tgz) without trusting them.

Refused, with one line naming the archive and the entry, before anything is kept:
- entries that would land outside the target folder (absolute paths, `..` parts, drive letters);
- links of any kind (symlinks, hard links) and devices or pipes: only files and folders;
- entry names that are not UTF-8 text (or hold a NUL): they are shown escaped, never stored;
- zip bombs: one budget for the whole archive, whatever its format and however small its
  entries: what it unpacks to is at most MARGINALIA_UPLOAD_MAX_EXTRACTED_BYTES and at most
  MARGINALIA_UPLOAD_MAX_COMPRESSION_RATIO times the archive's own size. For a zip that counts the
  entries' declared sizes and every byte written; for a .tar.gz, the decompressed stream itself
  (headers included) as it is read or skipped, so listing a bomb costs no more than the budget;
- a corrupt archive: a tar ends only at its end-of-archive blocks (zeros), so a header with a bad
  checksum in the middle is refused instead of silently ending the listing there.
Sizes are counted while bytes are written, so a header that lies about them does not help. On
any refusal the target folder is removed again: nothing stays written."""

from __future__ import annotations

import gzip
import io
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from django.conf import settings

from retrieval.errors import InputError
from retrieval.input_rules import character_problem

CHUNK = 1 << 16
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz")
UNREADABLE = (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, EOFError, OSError)


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_entries: int
    max_ratio: float

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            max_bytes=settings.MARGINALIA_UPLOAD_MAX_EXTRACTED_BYTES,
            max_entries=settings.MARGINALIA_UPLOAD_MAX_ARCHIVE_ENTRIES,
            max_ratio=settings.MARGINALIA_UPLOAD_MAX_COMPRESSION_RATIO,
        )


@dataclass(frozen=True)
class Budget:
    """What one archive may unpack to: the smaller of the byte limit and ratio x its size."""

    limits: Limits
    archive_bytes: int
    label: str

    @property
    def bytes(self) -> int:
        return int(min(self.limits.max_bytes, self.limits.max_ratio * max(self.archive_bytes, 1)))

    def refusal(self) -> InputError:
        if self.limits.max_bytes <= self.limits.max_ratio * max(self.archive_bytes, 1):
            message = f"unpacks to more than {self.limits.max_bytes} bytes (MARGINALIA_UPLOAD_MAX_EXTRACTED_BYTES)"
        else:
            message = (
                f"unpacks to more than {self.bytes} bytes, {self.limits.max_ratio:g} times its"
                f" {self.archive_bytes} bytes (MARGINALIA_UPLOAD_MAX_COMPRESSION_RATIO); a zip bomb?"
            )
        return InputError(message, file=self.label)


@dataclass(frozen=True)
class Entry:
    name: str
    is_dir: bool
    size: int  # declared uncompressed size
    kind_problem: str | None  # why this kind of entry is refused (a link, a device), if it is


def is_archive(filename: str) -> bool:
    return filename.lower().endswith(ARCHIVE_SUFFIXES)


def shown(name: str) -> str:
    """An entry name as it can be printed and stored: bytes that are not UTF-8 (which tarfile
    keeps as lone surrogates) as \\xNN, control characters escaped."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


class _BoundedStream(io.RawIOBase):
    """A tar's decompressed stream that refuses to go past the budget, whether tarfile reads
    there or seeks there (skipping a member's data decompresses it too), and remembers the last
    block read: the header that ended the listing."""

    def __init__(self, source: gzip.GzipFile, budget: Budget):
        self.source, self.budget, self.last_read = source, budget, b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        limit = self.budget.bytes - self.source.tell()
        wanted = limit + 1 if size is None or size < 0 else min(size, limit + 1)
        data = self.source.read(wanted)
        if self.source.tell() > self.budget.bytes:
            raise self.budget.refusal()
        self.last_read = data
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = {io.SEEK_SET: offset, io.SEEK_CUR: self.source.tell() + offset}.get(whence)
        if target is None:
            raise OSError("a tar stream cannot be read from its end")
        if target > self.budget.bytes:
            raise self.budget.refusal()
        return self.source.seek(target)

    def tell(self) -> int:
        return self.source.tell()


def _entries(archive: Path, budget: Budget) -> Iterator[tuple[Entry, object]]:
    """Every entry with its handle in the open archive, zip or tar, without extracting."""
    if archive.name.lower().endswith(".zip"):
        try:
            bundle = zipfile.ZipFile(archive)
        except UnicodeDecodeError:
            raise InputError("an entry's name is marked UTF-8 but is not UTF-8 text", file=budget.label) from None
        with bundle:
            for info in bundle.infolist():
                mode = info.external_attr >> 16
                problem = "a symbolic link" if stat.S_ISLNK(mode) else None
                yield Entry(info.filename, info.is_dir(), info.file_size, problem), (bundle, info)
        return
    with gzip.open(archive) as decompressed:
        stream = _BoundedStream(decompressed, budget)
        with tarfile.open(fileobj=stream, mode="r:") as bundle:
            for member in bundle:
                problem = None
                if member.issym():
                    problem = "a symbolic link"
                elif member.islnk():
                    problem = "a hard link"
                elif member.issparse() or not (member.isfile() or member.isdir()):
                    problem = "not a plain file or folder"
                yield Entry(member.name, member.isdir(), member.size, problem), (bundle, member)
            _check_tar_end(bundle, stream, budget.label)


def _check_tar_end(bundle: tarfile.TarFile, stream: _BoundedStream, label: str) -> None:
    """tarfile ends a listing at the first header it cannot read, as at the end of the archive:
    only zero blocks (or nothing) may follow the last entry."""
    if any(stream.last_read):
        raise InputError(f"not a readable archive (a corrupt tar header at byte {bundle.offset})", file=label)
    while chunk := stream.read(CHUNK):
        if any(chunk):
            raise InputError(f"not a readable archive (data after its end, at byte {bundle.offset})", file=label)


def _safe_relative(name: str) -> PurePosixPath | None:
    """The entry's path inside the target folder, or None when it would escape it."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        return None
    return path


def _open_member(handle) -> IO[bytes]:
    bundle, member = handle
    return bundle.open(member) if isinstance(bundle, zipfile.ZipFile) else bundle.extractfile(member)


def check(archive: Path, *, label: str | None = None, limits: Limits | None = None) -> None:
    """The refusals `extract` makes from the archive's listing alone (names, links, declared
    sizes, the budget), writing nothing: an upload is refused at once, before a job is queued."""
    label = label or archive.name
    try:
        _extract(archive, None, Budget(limits or Limits.from_settings(), archive.stat().st_size, label))
    except UNREADABLE as error:
        raise InputError(f"not a readable archive ({shown(str(error))})", file=label) from error


def extract(archive: Path, target: Path, *, label: str | None = None, limits: Limits | None = None) -> Path:
    """Unpack `archive` into the new folder `target` under the rules above; returns `target`.
    Errors name `label` (the name the uploader gave the file) rather than where it sits on disk."""
    label = label or archive.name
    target.mkdir(parents=True)
    try:
        _extract(archive, target, Budget(limits or Limits.from_settings(), archive.stat().st_size, label))
    except InputError:
        shutil.rmtree(target, ignore_errors=True)
        raise
    except UNREADABLE as error:
        shutil.rmtree(target, ignore_errors=True)
        raise InputError(f"not a readable archive ({shown(str(error))})", file=label) from error
    return target


def _extract(archive: Path, target: Path | None, budget: Budget) -> None:
    """Walk the entries, refusing as described above; write them under `target` unless None."""
    label, limits = budget.label, budget.limits
    written = entries = declared = 0
    for entry, handle in _entries(archive, budget):
        entries += 1
        if entries > limits.max_entries:
            raise InputError(
                f"more than {limits.max_entries} entries (MARGINALIA_UPLOAD_MAX_ARCHIVE_ENTRIES)", file=label
            )
        if problem := character_problem(entry.name):
            text = "is not UTF-8 text" if "surrogate" in problem[1] else "contains a NUL character"
            raise InputError(f"entry '{shown(entry.name)}': its name {text}", file=label)
        relative = _safe_relative(entry.name)
        if relative is None:
            raise InputError(f"entry '{shown(entry.name)}' would be written outside the upload folder", file=label)
        if entry.kind_problem:
            raise InputError(
                f"entry '{shown(entry.name)}' is {entry.kind_problem}; only files and folders are accepted", file=label
            )
        if entry.is_dir:
            if target is not None:
                target.joinpath(*relative.parts).mkdir(parents=True, exist_ok=True)
            continue
        declared += entry.size
        if declared > budget.bytes:
            raise budget.refusal()
        if target is None:
            continue
        destination = target.joinpath(*relative.parts)
        destination.parent.mkdir(parents=True, exist_ok=True)
        with _open_member(handle) as source, destination.open("wb") as sink:
            while chunk := source.read(CHUNK):
                written += len(chunk)
                if written > budget.bytes:
                    raise budget.refusal()
                sink.write(chunk)
