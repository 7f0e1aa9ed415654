"""Passage embeddings kept on disk, so a collection is encoded once per model, not once per run.

Layout: `<root>/<model key>/collection-<id>/<shard>/<segment>.npz`, where the model key is a
checksum of the model's files (plus the precision it ran in) and a shard is one book (RELiC
candidate sets never cross books, so a run loads one book's vectors at a time) or the whole
collection when passages have no document (BEIR). Each entry is keyed by (passage pk, sha256 of
the passage text): a changed model lands in another folder and a changed text misses, so stale
vectors are never returned.

Segments are append-only and written atomically (temporary file + `os.replace`), so concurrent
workers never see half a file; many small segments are merged when a shard is loaded.
"""

from __future__ import annotations

import fcntl
import hashlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .files import write_atomically
from .models import Passage

DIGEST_BYTES = 16
# Merging happens on load once a shard has this many segments (one is written per candidate set).
MAX_SEGMENTS = 32
# Shards held in memory at once: a run visits books one after another.
SHARDS_IN_MEMORY = 4

ShardKey = tuple[int, int | None]
Entries = dict[tuple[int, bytes], np.ndarray]


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:DIGEST_BYTES]


class EmbeddingCache:
    """The embeddings of one model; `embeddings()` encodes only what is not on disk yet."""

    def __init__(self, root: Path, model_key: str):
        self.folder = Path(root) / model_key
        self._shards: OrderedDict[ShardKey, Entries] = OrderedDict()
        self._seen: dict[ShardKey, set[str]] = {}  # segment files each loaded shard holds

    def embeddings(self, passages: Sequence[Passage], encode: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """Vectors for `passages` in their order (float32, one row each)."""
        texts = [passage.retrieval_text for passage in passages]
        keys = [(passage.pk, text_digest(text)) for passage, text in zip(passages, texts)]
        shard_keys = [(passage.collection_id, passage.document_id) for passage in passages]
        found: list[np.ndarray | None] = [self._shard(shard_key).get(key) for shard_key, key in zip(shard_keys, keys)]
        missing = [index for index, vector in enumerate(found) if vector is None]
        if not missing:
            return np.stack(found).astype(np.float32, copy=False) if found else np.zeros((0, 0), dtype=np.float32)
        # Shards of one run (or several runs) on other workers may be encoding the same passages:
        # one encodes while the others wait, then they read its vectors from disk. Workers after
        # other passages, of the same book too, go on: the lock claims these passages only.
        with self._claimed(sorted(keys[index] for index in missing), shard_keys[missing[0]][0]):
            for shard_key in {shard_keys[index] for index in missing}:
                if self._segment_names(self._shard_folder(shard_key)) - self._seen.get(shard_key, set()):
                    self._shards.pop(shard_key, None)  # another process wrote meanwhile: reload
            for index in missing:
                found[index] = self._shard(shard_keys[index]).get(keys[index])
            missing = [index for index, vector in enumerate(found) if vector is None]
            self._encode_missing(found, missing, texts, keys, shard_keys, encode)
        return np.stack(found).astype(np.float32, copy=False)

    @contextmanager
    def _claimed(self, keys: list[tuple[int, bytes]], collection_id: int):
        """Hold an exclusive lock (flock, released if the process dies) named after exactly these
        passages and texts. Segments are append-only files written whole, so writing them needs
        no lock; the claim only keeps two workers from encoding the same passages at once. The
        claim files live in the collection's folder and go with it."""
        digest = hashlib.sha256(b"".join(pk.to_bytes(8, "little") + text for pk, text in keys)).hexdigest()
        folder = self.folder / f"collection-{collection_id}" / ".claims"
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / f"{digest}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _encode_missing(self, found, missing, texts, keys, shard_keys, encode) -> None:
        """Encode the `missing` positions, fill them into `found` and append them to their shards."""
        if not missing:
            return
        vectors = np.asarray(encode([texts[index] for index in missing]), dtype=np.float32)
        by_shard: dict[ShardKey, list[int]] = {}
        for row, index in enumerate(missing):
            found[index] = vectors[row]
            by_shard.setdefault(shard_keys[index], []).append(row)
        for shard_key, rows in by_shard.items():
            new_keys = [keys[missing[row]] for row in rows]
            self._write_segment(shard_key, new_keys, vectors[rows])
            self._shard(shard_key).update(zip(new_keys, vectors[rows]))

    def _shard_folder(self, shard_key: ShardKey) -> Path:
        collection_id, document_id = shard_key
        shard = f"document-{document_id}" if document_id is not None else "all"
        return self.folder / f"collection-{collection_id}" / shard

    def _shard(self, shard_key: ShardKey) -> Entries:
        if shard_key in self._shards:
            self._shards.move_to_end(shard_key)
            return self._shards[shard_key]
        entries, self._seen[shard_key] = self._load(self._shard_folder(shard_key))
        self._shards[shard_key] = entries
        while len(self._shards) > SHARDS_IN_MEMORY:
            self._shards.popitem(last=False)
        return entries

    @staticmethod
    def _segment_names(folder: Path) -> set[str]:
        return {path.name for path in folder.glob("*.npz")} if folder.is_dir() else set()

    def _load(self, folder: Path) -> tuple[Entries, set[str]]:
        """The shard's entries and the names of the segment files they came from."""
        segments = sorted(folder.glob("*.npz")) if folder.is_dir() else []
        entries: Entries = {}
        loaded = []
        for segment in segments:
            try:
                with np.load(segment, allow_pickle=False) as data:
                    ids, digests, vectors = data["ids"], data["digests"], data["vectors"]
            except FileNotFoundError:  # merged away by another worker meanwhile: its rows are in the merge
                continue
            entries.update(((int(pk), digest.tobytes()), vector) for pk, digest, vector in zip(ids, digests, vectors))
            loaded.append(segment)
        if len(loaded) > MAX_SEGMENTS:
            return entries, {self._merge(folder, entries, loaded).name}
        return entries, {segment.name for segment in loaded}

    def _merge(self, folder: Path, entries: Entries, segments: list[Path]) -> Path:
        keys = list(entries)
        merged = _write_segment_file(folder, keys, np.stack([entries[key] for key in keys]))
        for segment in segments:
            segment.unlink(missing_ok=True)
        return merged

    def _write_segment(self, shard_key: ShardKey, keys: list[tuple[int, bytes]], vectors: np.ndarray) -> None:
        written = _write_segment_file(self._shard_folder(shard_key), keys, vectors)
        self._seen.setdefault(shard_key, set()).add(written.name)


def _write_segment_file(folder: Path, keys: list[tuple[int, bytes]], vectors: np.ndarray) -> Path:
    ids = np.array([pk for pk, _ in keys], dtype=np.int64)
    digests = np.frombuffer(b"".join(digest for _, digest in keys), dtype=np.uint8).reshape(len(keys), DIGEST_BYTES)
    vectors = np.asarray(vectors, dtype=np.float32)
    # Time-ordered names keep `ls` readable; the random part keeps concurrent writers apart.
    final = folder / f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.npz"
    write_atomically(final, lambda stream: np.savez(stream, ids=ids, digests=digests, vectors=vectors), binary=True)
    return final
