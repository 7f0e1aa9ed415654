"""Unpacking uploaded archives (.zip, .tar.gz / .tgz) without trusting them.

Refused, with one line naming the archive and the entry, before anything is kept:
- entries that would land outside the target folder (absolute paths, `..` parts, drive letters);
- links of any kind (symlinks, hard links) and devices or pipes: only files and folders;
- zip bombs: more entries than allowed, a total (declared or actually read) above the extracted
  size limit, or an entry that inflates more than the allowed ratio.
Sizes are counted while bytes are written, so a header that lies about them does not help. On
any refusal the target folder is removed again: nothing stays written."""

from __future__ import annotations

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

CHUNK = 1 << 16
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz")


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
class Entry:
    name: str
    is_dir: bool
    size: int  # declared uncompressed size
    packed: int  # declared compressed size (zip); the size itself in a tar
    kind_problem: str | None  # why this kind of entry is refused (a link, a device), if it is


def is_archive(filename: str) -> bool:
    return filename.lower().endswith(ARCHIVE_SUFFIXES)


def _entries(archive: Path) -> Iterator[tuple[Entry, object]]:
    """Every entry with its handle in the open archive, zip or tar, without extracting."""
    if archive.name.lower().endswith(".zip"):
        with zipfile.ZipFile(archive) as bundle:
            for info in bundle.infolist():
                mode = info.external_attr >> 16
                problem = "a symbolic link" if stat.S_ISLNK(mode) else None
                yield Entry(info.filename, info.is_dir(), info.file_size, info.compress_size, problem), (bundle, info)
        return
    with tarfile.open(archive, mode="r:gz") as bundle:
        for member in bundle:
            problem = None
            if member.issym():
                problem = "a symbolic link"
            elif member.islnk():
                problem = "a hard link"
            elif not (member.isfile() or member.isdir()):
                problem = "not a file or folder"
            yield Entry(member.name, member.isdir(), member.size, member.size, problem), (bundle, member)


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
    sizes and ratios), writing nothing: an upload is refused at once, before a job is queued."""
    limits = limits or Limits.from_settings()
    label = label or archive.name
    try:
        _extract(archive, None, label, limits)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as error:
        raise InputError(f"not a readable archive ({error})", file=label) from error


def extract(archive: Path, target: Path, *, label: str | None = None, limits: Limits | None = None) -> Path:
    """Unpack `archive` into the new folder `target` under the rules above; returns `target`.
    Errors name `label` (the name the uploader gave the file) rather than where it sits on disk."""
    limits = limits or Limits.from_settings()
    label = label or archive.name
    target.mkdir(parents=True)
    try:
        _extract(archive, target, label, limits)
    except InputError:
        shutil.rmtree(target, ignore_errors=True)
        raise
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as error:
        shutil.rmtree(target, ignore_errors=True)
        raise InputError(f"not a readable archive ({error})", file=label) from error
    return target


def _extract(archive: Path, target: Path | None, label: str, limits: Limits) -> None:
    """Walk the entries, refusing as described above; write them under `target` unless None."""
    written = entries = 0
    declared = 0
    for entry, handle in _entries(archive):
        entries += 1
        if entries > limits.max_entries:
            raise InputError(
                f"more than {limits.max_entries} entries (MARGINALIA_UPLOAD_MAX_ARCHIVE_ENTRIES)", file=label
            )
        relative = _safe_relative(entry.name)
        if relative is None:
            raise InputError(f"entry '{entry.name}' would be written outside the upload folder", file=label)
        if entry.kind_problem:
            raise InputError(
                f"entry '{entry.name}' is {entry.kind_problem}; only files and folders are accepted", file=label
            )
        if entry.is_dir:
            if target is not None:
                target.joinpath(*relative.parts).mkdir(parents=True, exist_ok=True)
            continue
        declared += entry.size
        if declared > limits.max_bytes:
            raise _too_big(label, limits)
        if entry.size > limits.max_ratio * max(entry.packed, 1) and entry.size > CHUNK:
            raise InputError(
                f"entry '{entry.name}' inflates {entry.size / max(entry.packed, 1):.0f} times"
                f" (at most {limits.max_ratio:g}: MARGINALIA_UPLOAD_MAX_COMPRESSION_RATIO); a zip bomb?",
                file=label,
            )
        if target is None:
            continue
        destination = target.joinpath(*relative.parts)
        destination.parent.mkdir(parents=True, exist_ok=True)
        with _open_member(handle) as source, destination.open("wb") as sink:
            while chunk := source.read(CHUNK):
                written += len(chunk)
                if written > limits.max_bytes:
                    raise _too_big(label, limits)
                sink.write(chunk)


def _too_big(label: str, limits: Limits) -> InputError:
    return InputError(
        f"unpacks to more than {limits.max_bytes} bytes (MARGINALIA_UPLOAD_MAX_EXTRACTED_BYTES)", file=label
    )
