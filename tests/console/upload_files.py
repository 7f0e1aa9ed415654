"""Files to upload in the console tests: a small BEIR folder packed as .zip or .tar.gz, and
archives that attack the unpacker (path traversal, links, a zip bomb)."""

import gzip
import io
import struct
import tarfile
import zipfile
import zlib
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


def tar_gz_of_zeros(archive: Path, name: str, size: int) -> Path:
    """A .tar.gz of one entry of `size` zero bytes, as a bomb is made, in seconds: deflate output
    after a full flush does not refer back, so one compressed 16 MiB of zeros is repeated rather
    than compressing gigabytes (gzip's trailer gets the real CRC and length)."""
    header = tarfile.TarInfo(name)
    header.size = size
    head = header.tobuf(format=tarfile.GNU_FORMAT)
    zeros = size + (-size % tarfile.BLOCKSIZE) + 2 * tarfile.BLOCKSIZE  # data, padding, end blocks
    chunk = bytes(1 << 24)

    def deflated(data: bytes) -> bytes:
        packer = zlib.compressobj(9, zlib.DEFLATED, -15)
        return packer.compress(data) + packer.flush(zlib.Z_FULL_FLUSH)

    crc, whole, rest = zlib.crc32(head), *divmod(zeros, len(chunk))
    for _ in range(whole):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(chunk[:rest], crc)
    repeated = deflated(chunk)
    with archive.open("wb") as packed:
        packed.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip header: deflate, no name
        packed.write(deflated(head))
        for _ in range(whole):
            packed.write(repeated)
        packed.write(deflated(chunk[:rest]))
        packed.write(b"\x03\x00")  # the final, empty block
        packed.write(struct.pack("<II", crc, (len(head) + zeros) & 0xFFFFFFFF))
    return archive


def corrupt_tar_gz(path: Path, entries: dict[str, bytes], corrupt: str) -> Path:
    """A .tar.gz whose header of entry `corrupt` no longer matches its checksum."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as bundle:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    data = bytearray(raw.getvalue())
    header = data.index(corrupt.encode())
    data[header + len(corrupt) - 1] ^= 0x01  # one bit of the name: the stored checksum is now wrong
    path.write_bytes(gzip.compress(bytes(data)))
    return path


def zip_with_raw_name(path: Path, raw_name: bytes) -> Path:
    """A zip whose entry name is `raw_name`, flagged as UTF-8 (bit 11) whatever the bytes are:
    written with a placeholder name, then patched in both headers."""
    placeholder = b"x" * len(raw_name)
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr(placeholder.decode(), b"{}")
    data = bytearray(path.read_bytes().replace(placeholder, raw_name))
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        data[data.index(signature) + flags_at + 1] |= 0x08  # bit 11 of the little-endian flags
    path.write_bytes(bytes(data))
    return path


def latin1_tar_gz(archive: Path, name: str) -> Path:
    """A .tar.gz whose one entry's name is stored in Latin-1, not UTF-8 (an old tar's habit)."""
    with tarfile.open(archive, "w:gz", format=tarfile.GNU_FORMAT, encoding="latin-1") as bundle:
        info = tarfile.TarInfo(name)
        info.size = 2
        bundle.addfile(info, io.BytesIO(b"{}"))
    return archive
