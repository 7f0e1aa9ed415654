"""Files to upload in the console tests: a small BEIR folder packed as .zip or .tar.gz, and
archives that attack the unpacker (path traversal, links, a zip bomb)."""

import io
import tarfile
import zipfile
from pathlib import Path

from tests.factories import write_beir_folder

CORPUS = [
    {"_id": "d1", "title": "Harbour", "text": "The harbour project doubled in cost."},
    {"_id": "d2", "title": "", "text": "A council meeting about parking."},
    {"_id": "d3", "title": "Port", "text": "Ships wait outside the old port."},
]
QUERIES = [{"_id": "q1", "text": "harbour cost"}, {"_id": "q2", "text": "ships at the port"}]
QRELS = [("q1", "d1", 1), ("q2", "d3", 2)]


def beir_folder(tmp_path: Path, corpus=CORPUS) -> Path:
    return write_beir_folder(tmp_path / "beir-src" / "tiny-beir", corpus, QUERIES, QRELS)


def zip_folder(folder: Path, archive: Path) -> Path:
    """`folder` zipped with its name as the one top-level folder."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in sorted(folder.rglob("*")):
            bundle.write(path, path.relative_to(folder.parent).as_posix())
    return archive


def tar_folder(folder: Path, archive: Path) -> Path:
    with tarfile.open(archive, "w:gz") as bundle:
        bundle.add(folder, arcname=folder.name)
    return archive


def zip_with(archive: Path, entries: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in entries.items():
            bundle.writestr(name, data)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16  # a symbolic link
            bundle.writestr(info, target)
    return archive


def tar_with(archive: Path, entries: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> Path:
    with tarfile.open(archive, "w:gz") as bundle:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            bundle.addfile(info)
    return archive
