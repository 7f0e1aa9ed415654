"""Imports spread over the workers: a RELiC file of many books, or several plain-text books, as
one "import" job with a child job per book, and a plain-text book longer than CHUNK_CHARACTERS
split into chunks of whole paragraphs (no sentence spans a paragraph, so segmenting the chunks
apart gives the book's sentences).

The command checks the whole input first, as the single-process import does, so bad input is
refused before anything is written. It then creates the collection and the job, writes each
part's checked input under MARGINALIA_DATA_DIR/imports/job-<id>/ (workers share the data
folder) and queues the parts on the "cpu" queue. A RELiC part stores its book (document,
sentences, windows, queries, qrels) with the ordinals the single-process import gives it, and
tokenises its candidate sets for BM25; a plain-text part segments its chunk with spaCy. When
the last part has succeeded, the worker that finished it completes the import: plain-text books
are stored in order, every book's passage ordinals running on as in the single-process import,
so both give the same rows. A part that fails or whose worker dies is retried alone
(MARGINALIA_SHARD_RETRIES); after that the job fails and the collection keeps no books
(retrieval.services.import_status) until `retry_job` runs it again. Until the job has succeeded,
runs on the collection are refused.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

from celery import signature
from django.conf import settings
from django.db import transaction

from jobs.models import Job
from jobs.progress import Progress
from jobs.services import create_job, dispatch_children, finish_job, mark_failed
from retrieval.errors import InputError
from retrieval.files import write_atomically
from retrieval.models import Collection, Document
from retrieval.text import paragraphs

from .import_status import IMPORT_KIND, IMPORT_PART_TASK, empty_collection, work_folder
from .importers import (
    RelicBook,
    RelicQuote,
    TextBook,
    book_text,
    check_distinct_books,
    check_new_collection,
    insert_relic_book,
    insert_text_books,
    parse_relic,
    refresh_import_statistics,
    relic_offsets,
    relic_summary,
    text_books_summary,
)
from .runs import warm_term_counts

# A plain-text book longer than this is segmented in chunks of whole paragraphs on several workers.
CHUNK_CHARACTERS = 200_000


def _write_json(path: Path, data) -> None:
    write_atomically(path, lambda stream: stream.write(json.dumps(data)))


def _read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _start(collection: Collection, parameters: dict, parts: list, manifest: dict, user) -> Job:
    """The import job of `collection` with one child per part, queued after commit."""
    parameters = {"collection_id": collection.pk, "collection": collection.name, "parts": len(parts), **parameters}
    job = create_job(IMPORT_KIND, "cpu", parameters, user=user)
    folder = work_folder(job.pk)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for number, part in enumerate(parts):
            _write_json(folder / f"part-{number}.json", part)
        _write_json(folder / "manifest.json", manifest)
        dispatch_children(
            job,
            signature(IMPORT_PART_TASK),
            [[number] for number in range(len(parts))],
            max_attempts=1 + settings.MARGINALIA_SHARD_RETRIES,
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return job


def start_relic_import(path: str | Path, *, collection_name: str | None = None, split: str = "test", user=None) -> Job:
    """Check a RELiC file whole, then queue its import as one part per book. Refused
    (InputError, BrokerUnavailable) with nothing written."""
    path = Path(path)
    name = check_new_collection(collection_name or path.stem)
    books = parse_relic(path)
    parts = [
        {"book": asdict(book), "ordinal": ordinal, "passage_offset": passages, "query_offset": queries, "split": split}
        for ordinal, (book, (passages, queries)) in enumerate(zip(books, relic_offsets(books)))
    ]
    with transaction.atomic():
        collection = Collection.objects.create(name=name, kind=Collection.Kind.RELIC, source=str(path))
        manifest = {"kind": "relic", "summary": relic_summary(name, books)}
        return _start(collection, {"kind": "relic", "books": len(books)}, parts, manifest, user)


def chunks_of(text: str) -> list[list[str]]:
    """The book's paragraphs in consecutive chunks of at most CHUNK_CHARACTERS (a longer
    paragraph is a chunk of its own)."""
    chunks: list[list[str]] = [[]]
    size = 0
    for paragraph in paragraphs(text):
        if chunks[-1] and size + len(paragraph) > CHUNK_CHARACTERS:
            chunks.append([])
            size = 0
        chunks[-1].append(paragraph)
        size += len(paragraph)
    return chunks


def start_book_import(books: list[TextBook], *, collection_name: str, source: str = "", user=None) -> Job:
    """Check plain-text books (metadata, distinct names, readable, non-empty), then queue their
    segmentation as one part per book or per chunk of a long book; the last part to finish stores
    the books. Refused (InputError, BrokerUnavailable) with nothing written."""
    name = check_new_collection(collection_name)
    check_distinct_books(books)
    parts, counts = [], []
    for number, book in enumerate(books):
        chunks = chunks_of(book_text(book))
        parts += [{"text_book": number, "chunk": index, "paragraphs": chunk} for index, chunk in enumerate(chunks)]
        counts.append(len(chunks))
    manifest = {"kind": "text", "books": [asdict(book) for book in books], "chunks": counts}
    with transaction.atomic():
        collection = Collection.objects.create(name=name, kind=Collection.Kind.BOOK, source=source[:500])
        return _start(collection, {"kind": "text", "books": len(books)}, parts, manifest, user)


def import_part(job_id: int, number: int, progress: Progress) -> dict:
    """Part `number` of the import whose child job is `job_id`: store a RELiC book (an earlier
    attempt's rows removed first, in the same transaction) or segment a chunk of a plain-text
    book."""
    parent = Job.objects.get(pk=job_id).parent
    folder = work_folder(parent.pk)
    part = _read_json(folder / f"part-{number}.json")
    if "paragraphs" in part:
        # Imported here, where a plain-text chunk is segmented: spaCy costs seconds of CPU to import
        # (thinc imports torch), which a worker storing RELiC books (segmented already) or queueing
        # an import would otherwise pay for nothing.
        from retrieval.segmentation import split_sentences

        sentences = split_sentences("\n\n".join(part["paragraphs"]))
        _write_json(folder / f"part-{number}.sentences.json", sentences)
        progress(1.0, f"{len(sentences)} sentences")
        return {"book": part["text_book"], "chunk": part["chunk"], "sentences": len(sentences)}
    collection = Collection.objects.get(pk=parent.parameters["collection_id"])
    data = part["book"]
    book = RelicBook(
        data["external_id"],
        data["sentences"],
        [tuple(window) for window in data["windows"]],
        [RelicQuote(**quote) for quote in data["quotes"]],
    )
    with transaction.atomic():
        Document.objects.filter(collection=collection, external_id=book.external_id).delete()
        document = insert_relic_book(
            collection,
            book,
            ordinal=part["ordinal"],
            passage_offset=part["passage_offset"],
            query_offset=part["query_offset"],
            split=part["split"],
        )
    progress(0.8, "stored; counting terms")
    warm_term_counts(collection, document)
    return {"book": book.external_id, "sentences": len(book.sentences), "queries": len(book.quotes)}


def complete_import(parent_id: int) -> Job | None:
    """Called after each part: once every part has succeeded, store the plain-text books (in
    book order, inside one transaction), refresh the planner's statistics and mark the job
    succeeded. Only one caller wins: the job row is locked (on SQLite the transaction takes the
    database's write lock) and checked again. A failure here fails the job. Once the job has
    failed or been cancelled, each part that ends empties the collection again."""
    parent = Job.objects.get(pk=parent_id)
    if parent.status in (Job.Status.FAILED, Job.Status.CANCELLED):
        # A part that was storing its book when the job ended stores it after the first settling.
        empty_collection(parent.parameters["collection_id"])
        return None
    if parent.status != Job.Status.RUNNING or parent.children.exclude(status=Job.Status.SUCCEEDED).exists():
        return None
    folder = work_folder(parent_id)
    try:
        with transaction.atomic():
            if not Job.objects.select_for_update().filter(pk=parent_id, status=Job.Status.RUNNING).exists():
                return None
            manifest = _read_json(folder / "manifest.json")
            collection = Collection.objects.get(pk=parent.parameters["collection_id"])
            summary = manifest.get("summary")
            if manifest["kind"] == "text":
                books = _segmented_books(folder, manifest)
                insert_text_books(collection, books)
                summary = text_books_summary(collection.name, books)
            else:
                refresh_import_statistics()
            finish_job(parent_id, summary)
            transaction.on_commit(lambda: shutil.rmtree(folder, ignore_errors=True))
    except Exception as exc:
        mark_failed(parent_id, f"{type(exc).__name__}: {exc}")
        if not isinstance(exc, InputError):
            raise
        return None
    return Job.objects.get(pk=parent_id)


def _segmented_books(folder: Path, manifest: dict) -> list[TextBook]:
    """The manifest's books with their chunks' sentences put back together in order."""
    books, number = [], 0
    for data, chunks in zip(manifest["books"], manifest["chunks"]):
        book = TextBook(**{**data, "sentences": []})
        for _ in range(chunks):
            book.sentences += _read_json(folder / f"part-{number}.sentences.json")
            number += 1
        books.append(book)
    return books
