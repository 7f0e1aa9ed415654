"""Importers: a plain-text book, RELiC JSON, and BEIR-style folders.

Each importer reads and checks ALL of its input first and only then writes, in one transaction:
bad input raises `InputError` naming the file, the line (where a line means something) and the
field, and leaves the database as it was.

Book windows (import_book, RELiC candidates) get the external id "<document>:<start>:<length>",
so a passage means the same thing in every run, study and export.

RELiC decisions:
- A quote's Query keeps the dataset's quote id as its external id. RELiC's ids are unique across
  the whole dataset, so a repeated id (in the same or another book) is rejected, not renamed.
- The gold window is always a passage: when a book's listed candidates of the quote's length do
  not contain it, it is added after the listed ones (so it stays rankable). A quote whose length
  has no candidate list at all in its book is rejected: it would have no candidate set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from django.db import models, transaction

from jobs.progress import Progress, no_progress

from ..bulk import insert_rows
from ..errors import InputError
from ..input_rules import (
    column_range,
    json_type,
    load_json,
    parse_integer,
    read_jsonl,
    read_lines,
    read_text,
    refuse_repeated_keys,
)
from ..models import Collection, Document, Passage, PoolEntry, Qrel, Query, Sentence
from ..planner import refresh_statistics
from ..text import MAX_WINDOW, strip_gutenberg, window_counts
from .qrels_import import QRELS_HEADER
from .runs import warm_term_counts

BATCH_SIZE = 2000
CANDIDATE_KEYS = {f"{n}_sentence": n for n in range(1, MAX_WINDOW + 1)}


def window_external_id(document_external_id: str, start: int, length: int) -> str:
    return f"{document_external_id}:{start}:{length}"


# --- reading and checking ----------------------------------------------------------------------


def _max_length(model: type[models.Model], field_name: str) -> int:
    return model._meta.get_field(field_name).max_length


def _check_length(value: str, limit: int, *, field: str, file: str | None = None, line: int | None = None) -> str:
    if len(value) > limit:
        raise InputError(f"longer than {limit} characters", file=file, line=line, field=field)
    return value


def check_new_collection(name: str | None) -> str:
    name = (name or "").strip()
    if not name:
        raise InputError("a collection name is required", field="collection")
    _check_length(name, _max_length(Collection, "name"), field="collection")
    if Collection.objects.filter(name=name).exists():
        raise InputError(f"a collection named '{name}' already exists", field="collection")
    return name


# --- writing -----------------------------------------------------------------------------------

SENTENCE_COLUMNS = ("document_id", "index", "text")
PASSAGE_COLUMNS = ("collection_id", "document_id", "external_id", "title", "text", "start", "length", "ordinal")
QUERY_COLUMNS = (
    "collection_id",
    "external_id",
    "text",
    "left_context",
    "right_context",
    "document_id",
    "quote_length",
    "split",
    "metadata",
    "ordinal",
)
QREL_COLUMNS = ("query_id", "passage_id", "relevance")
POOL_COLUMNS = ("query_id", "passage_id", "position")


def _insert(model, columns, rows: list[tuple], progress: Progress, span: tuple[float, float], message: str) -> None:
    """Insert `rows` (tuples of `columns`) in batches through one statement shape
    (retrieval.bulk), reporting progress across `span` (fractions of the whole import)."""
    low, high = span
    for offset in range(0, len(rows), BATCH_SIZE):
        insert_rows(model, columns, rows[offset : offset + BATCH_SIZE])
        done = min(len(rows), offset + BATCH_SIZE)
        progress(low + (high - low) * done / len(rows), f"{message} {done}/{len(rows)}")


def _external_ids(queryset) -> dict[str, int]:
    return dict(queryset.values_list("external_id", "pk"))


def refresh_import_statistics() -> None:
    """The planner's statistics of the tables an import filled (retrieval.planner)."""
    refresh_statistics(Document, Sentence, Passage, Query, Qrel, PoolEntry)


def book_windows(sentences: int) -> list[tuple[int, int]]:
    """(start, length) of every window of 1..MAX_WINDOW sentences, length-major then start: the
    import order of a book's passages."""
    return [(start, length) for length in range(1, MAX_WINDOW + 1) for start in range(sentences - length + 1)]


def _insert_windows(
    document: Document, sentences: list[str], windows: list[tuple[int, int]], passage_offset: int
) -> None:
    """The book's sentences and its windows as passages, ordinals from `passage_offset`."""
    insert_rows(Sentence, SENTENCE_COLUMNS, [(document.pk, index, text) for index, text in enumerate(sentences)])
    rows = [
        (
            document.collection_id,
            document.pk,
            window_external_id(document.external_id, start, length),
            "",
            " ".join(sentences[start : start + length]),
            start,
            length,
            passage_offset + index,
        )
        for index, (start, length) in enumerate(windows)
    ]
    insert_rows(Passage, PASSAGE_COLUMNS, rows)


def insert_text_book(collection: Collection, book: TextBook, *, ordinal: int, passage_offset: int) -> Document:
    """A segmented plain-text book: its document, sentences and every 1..5-sentence window."""
    document = Document.objects.create(
        collection=collection, external_id=book.external_id, title=book.title, author=book.author, ordinal=ordinal
    )
    _insert_windows(document, book.sentences, book_windows(len(book.sentences)), passage_offset)
    return document


# --- import_book -------------------------------------------------------------------------------


@dataclass
class TextBook:
    """A plain-text book to import: the document's external id (the file name without its
    extension), title and author, and once segmented its sentences."""

    path: str
    external_id: str
    title: str
    author: str
    sentences: list[str] = field(default_factory=list)


def check_text_book(path: str | Path, title: str, author: str = "") -> TextBook:
    """A book's metadata checked, before anything is read or written."""
    path = Path(path)
    title, author = title.strip(), author.strip()
    if not title:
        raise InputError("a title is required", field="title")
    _check_length(title, _max_length(Document, "title"), field="title")
    _check_length(author, _max_length(Document, "author"), field="author")
    external_id = _check_length(path.stem, _max_length(Document, "external_id"), field="path", file=str(path))
    return TextBook(str(path), external_id, title, author)


def book_text(book: TextBook) -> str:
    """The book's work: its file without Project Gutenberg's header and licence."""
    text = read_text(Path(book.path))
    if not text.strip():
        raise InputError("the file is empty", file=book.path)
    return strip_gutenberg(text)


def check_sentences(book: TextBook) -> None:
    if not book.sentences:
        raise InputError("no sentences found in the book's text", file=book.path)


def check_distinct_books(books: list[TextBook]) -> None:
    """Books of one collection need distinct file names (their documents' ids)."""
    seen = set()
    for book in books:
        if book.external_id in seen:
            raise InputError(f"a second book named '{book.external_id}'", file=book.path, field="path")
        seen.add(book.external_id)


def text_books_summary(name: str, books: list[TextBook]) -> dict:
    counts = [window_counts(len(book.sentences)) for book in books]
    return {
        "collection": name,
        "books": len(books),
        "sentences": sum(len(book.sentences) for book in books),
        "passages": {str(length): sum(count[length] for count in counts) for length in range(1, MAX_WINDOW + 1)},
    }


def insert_text_books(collection: Collection, books: list[TextBook], progress: Progress = no_progress) -> None:
    """Every segmented book in order, passage ordinals running on across books."""
    offset = 0
    for ordinal, book in enumerate(books):
        check_sentences(book)
        insert_text_book(collection, book, ordinal=ordinal, passage_offset=offset)
        offset += sum(window_counts(len(book.sentences)).values())
        progress((ordinal + 1) / len(books), f"book {ordinal + 1}/{len(books)} stored")
    refresh_import_statistics()


def import_books(
    books: list[TextBook], *, collection_name: str, source: str = "", progress: Progress = no_progress
) -> dict:
    """Plain-text books as one collection, in this process: each book's sentences and every
    window of 1..5 consecutive sentences as passages (length-major, then start; ordinals run on
    from book to book). The same rows as the import spread over workers (import_jobs)."""
    # Imported here, the one importer that segments: spaCy costs seconds of CPU to import (thinc
    # imports torch), which every process importing this module (import_relic, qrels, uploads,
    # the workers' task modules) would otherwise pay without segmenting anything.
    from ..segmentation import split_sentences

    name = check_new_collection(collection_name)
    check_distinct_books(books)
    for number, book in enumerate(books):
        progress(0.7 * number / len(books), f"segmenting book {number + 1}/{len(books)}")
        book.sentences = split_sentences(book_text(book))
        check_sentences(book)
    with transaction.atomic():
        collection = Collection.objects.create(name=name, kind=Collection.Kind.BOOK, source=source[:500])
        insert_text_books(collection, books, lambda fraction, message: progress(0.7 + 0.3 * fraction, message))
    progress(1.0, "done")
    return text_books_summary(name, books)


def import_book(
    path: str | Path,
    *,
    title: str,
    author: str = "",
    collection_name: str | None = None,
    progress: Progress = no_progress,
) -> dict:
    """One book as a collection (named after the title unless given): its sentences and every
    window of 1..5 consecutive sentences as passages. The document's external id is the file
    name without its extension."""
    book = check_text_book(path, title, author)
    summary = import_books([book], collection_name=collection_name or book.title, source=str(path), progress=progress)
    return {key: summary[key] for key in ("collection", "sentences", "passages")}


# --- import_relic ------------------------------------------------------------------------------


@dataclass
class RelicQuote:
    external_id: str
    left: list[str]
    start: int
    length: int
    right: list[str]


@dataclass
class RelicBook:
    external_id: str
    sentences: list[str]
    windows: list[tuple[int, int]]  # (start, length), in import order
    quotes: list[RelicQuote]


class _JsonChecker:
    """Type checks on parsed JSON; failures name the file and the JSON path as the field."""

    def __init__(self, file: str):
        self.file = file

    def fail(self, field: str, message: str):
        raise InputError(message, file=self.file, field=field)

    def mapping(self, value, field: str) -> dict:
        if not isinstance(value, dict):
            self.fail(field, f"expected a JSON object, got {json_type(value)}")
        return value

    def array(self, value, field: str) -> list:
        if not isinstance(value, list):
            self.fail(field, f"expected a JSON array, got {json_type(value)}")
        return value

    def strings(self, value, field: str) -> list[str]:
        for index, item in enumerate(self.array(value, field)):
            if not isinstance(item, str):
                self.fail(f"{field}[{index}]", f"expected a string, got {json_type(item)}")
        return value

    def integer(self, value, field: str, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(field, f"expected an integer, got {json_type(value)}")
        if not low <= value <= high:
            self.fail(field, f"{value} is out of range {low}..{high}")
        return value

    def identifier(self, value: str, field: str, model: type[models.Model]) -> str:
        if not value.strip():
            self.fail(field, "empty id")
        return _check_length(value, _max_length(model, "external_id"), field=field, file=self.file)


def parse_relic(path: Path) -> list[RelicBook]:
    file = str(path)
    data = load_json(read_text(path), file=file, object_pairs_hook=refuse_repeated_keys(file))
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object of books, got {json_type(data)}", file=file)
    if not data:
        raise InputError("the file has no books", file=file)
    checker, quote_books = _JsonChecker(file), {}
    return [_parse_relic_book(checker, book_id, book, quote_books) for book_id, book in data.items()]


def _parse_relic_book(checker: _JsonChecker, book_id: str, book, quote_books: dict[str, str]) -> RelicBook:
    checker.identifier(book_id, book_id or "(empty book id)", Document)
    checker.mapping(book, book_id)
    for key in ("quotes", "sentences", "candidates"):
        if key not in book:
            checker.fail(f"{book_id}.{key}", "missing")
    sentences = checker.strings(book["sentences"], f"{book_id}.sentences")
    if not sentences:
        checker.fail(f"{book_id}.sentences", "a book needs at least one sentence")

    listed: dict[int, list[int]] = {}
    for key, starts in checker.mapping(book["candidates"], f"{book_id}.candidates").items():
        field = f"{book_id}.candidates.{key}"
        if key not in CANDIDATE_KEYS:
            checker.fail(field, f"unknown key; expected one of {', '.join(CANDIDATE_KEYS)}")
        length = CANDIDATE_KEYS[key]
        for index, start in enumerate(checker.array(starts, field)):
            checker.integer(start, f"{field}[{index}]", 0, len(sentences) - length)
        if len(set(starts)) != len(starts):
            checker.fail(field, "repeats a start index")
        listed[length] = starts

    quotes, gold_windows = [], set()
    for quote_id, quote in checker.mapping(book["quotes"], f"{book_id}.quotes").items():
        field = f"{book_id}.quotes.{quote_id}"
        checker.identifier(quote_id, field, Query)
        if quote_id in quote_books:
            checker.fail(field, f"quote id already used in book '{quote_books[quote_id]}'")
        quote_books[quote_id] = book_id
        if not isinstance(quote, list) or len(quote) != 4:
            checker.fail(field, "expected [left sentences, start index, length, right sentences]")
        left = checker.strings(quote[0], f"{field}[0]")
        length = checker.integer(quote[2], f"{field}[2]", 1, MAX_WINDOW)
        start = checker.integer(quote[1], f"{field}[1]", 0, len(sentences) - length)
        right = checker.strings(quote[3], f"{field}[3]")
        if length not in listed:
            message = f"no '{length}_sentence' list for quote '{quote_id}' of length {length}"
            checker.fail(f"{book_id}.candidates", message)
        quotes.append(RelicQuote(quote_id, left, start, length, right))
        gold_windows.add((start, length))

    windows = []
    for length in sorted(listed):
        windows += [(start, length) for start in listed[length]]
        present = set(listed[length])
        windows += sorted((start, n) for start, n in gold_windows if n == length and start not in present)
    return RelicBook(book_id, sentences, windows, quotes)


def insert_relic_book(
    collection: Collection, book: RelicBook, *, ordinal: int, passage_offset: int, query_offset: int, split: str
) -> Document:
    """One checked RELiC book: its document, sentences, candidate windows (ordinals from
    `passage_offset`), a query per quote (ordinals from `query_offset`) and each quote's qrel to
    its gold window."""
    document = Document.objects.create(
        collection=collection, external_id=book.external_id, title=book.external_id, ordinal=ordinal
    )
    _insert_windows(document, book.sentences, book.windows, passage_offset)
    queries = [
        (collection.pk, quote.external_id, "", quote.left, quote.right, document.pk, quote.length, split, {}, number)
        for number, quote in enumerate(book.quotes, start=query_offset)
    ]
    insert_rows(Query, QUERY_COLUMNS, queries)
    passage_ids = _external_ids(Passage.objects.filter(document=document))
    query_ids = _external_ids(Query.objects.filter(document=document))
    qrels = [
        (query_ids[quote.external_id], passage_ids[window_external_id(book.external_id, quote.start, quote.length)], 1)
        for quote in book.quotes
    ]
    insert_rows(Qrel, QREL_COLUMNS, qrels)
    return document


def relic_offsets(books: list[RelicBook]) -> list[tuple[int, int]]:
    """Each book's first passage and first query ordinal: they run on from book to book."""
    offsets, passages, queries = [], 0, 0
    for book in books:
        offsets.append((passages, queries))
        passages += len(book.windows)
        queries += len(book.quotes)
    return offsets


def import_relic(
    path: str | Path, *, collection_name: str | None = None, split: str = "test", progress: Progress = no_progress
) -> dict:
    """RELiC JSON, in this process: one Document per book with its sentences, a Passage per
    candidate window, a Query per quote (left/right context, quote length, `split`) and a Qrel to
    its gold window. The same rows as the import spread over workers (import_jobs)."""
    path = Path(path)
    name = check_new_collection(collection_name or path.stem)
    progress(0.0, "reading")
    books = parse_relic(path)
    progress(0.2, f"{len(books)} books checked")

    with transaction.atomic():
        collection = Collection.objects.create(name=name, kind=Collection.Kind.RELIC, source=str(path))
        for ordinal, (book, (passages, queries)) in enumerate(zip(books, relic_offsets(books))):
            insert_relic_book(
                collection, book, ordinal=ordinal, passage_offset=passages, query_offset=queries, split=split
            )
            progress(0.2 + 0.7 * (ordinal + 1) / len(books), f"book {ordinal + 1}/{len(books)} stored")
        refresh_import_statistics()
    warm_term_counts(collection)
    progress(1.0, "done")
    return relic_summary(name, books)


def relic_summary(name: str, books: list[RelicBook]) -> dict:
    return {
        "collection": name,
        "books": len(books),
        "queries": sum(len(book.quotes) for book in books),
        "sentences": sum(len(book.sentences) for book in books),
    }


# --- import_beir -------------------------------------------------------------------------------


@dataclass
class _BeirRecord:
    external_id: str
    text: str
    title: str = ""
    metadata: dict = field(default_factory=dict)


RECORD_KEYS = {"_id", "text", "title"}


def _record_metadata(record: dict) -> dict:
    """A record's other fields (BEIR's `metadata` object flattened in), kept for breakdowns
    such as LitSearch's specificity or quality."""
    extra = {key: value for key, value in record.items() if key not in RECORD_KEYS}
    nested = extra.pop("metadata", None)
    return {**(nested if isinstance(nested, dict) else {}), **extra}


def _record_id(record: dict, key: str, file: Path, line: int, model: type[models.Model]) -> str:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        problem = "missing" if value is None else f"expected a non-empty string, got {json.dumps(value)}"
        raise InputError(problem, file=str(file), line=line, field=key)
    return _check_length(str(value), _max_length(model, "external_id"), field=key, file=str(file), line=line)


def _record_string(record: dict, key: str, file: Path, line: int, *, required: bool) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        problem = "missing" if value is None else f"expected a string, got {json_type(value)}"
        raise InputError(problem, file=str(file), line=line, field=key)
    return value


def _parse_beir_records(path: Path, model: type[models.Model], *, with_title: bool) -> dict[str, _BeirRecord]:
    """Records by id, in file order; a repeated id is an error."""
    records: dict[str, _BeirRecord] = {}
    lines: dict[str, int] = {}
    for line, record in read_jsonl(path):
        external_id = _record_id(record, "_id", path, line, model)
        if external_id in records:
            message = f"duplicate id '{external_id}' (first on line {lines[external_id]})"
            raise InputError(message, file=str(path), line=line, field="_id")
        text = _record_string(record, "text", path, line, required=True)
        title = _record_string(record, "title", path, line, required=False) if with_title else ""
        _check_length(title, _max_length(Passage, "title"), field="title", file=str(path), line=line)
        metadata = {} if with_title else _record_metadata(record)
        records[external_id], lines[external_id] = _BeirRecord(external_id, text, title, metadata), line
    if not records:
        raise InputError("no records", file=str(path))
    return records


QRELS_SPLITS = ("train", "dev")


def _qrels_paths(directory: Path) -> dict[str, Path]:
    """Split -> qrels file: "test" from qrels.tsv (or qrels/test.tsv), required; "train" and
    "dev" from qrels/train.tsv and qrels/dev.tsv when present (the splits training uses)."""
    paths = {}
    for candidate in (directory / "qrels.tsv", directory / "qrels" / "test.tsv"):
        if candidate.is_file():
            paths["test"] = candidate
            break
    else:
        raise InputError("missing qrels.tsv (or qrels/test.tsv)", file=str(directory))
    for split in QRELS_SPLITS:
        if (directory / "qrels" / f"{split}.tsv").is_file():
            paths[split] = directory / "qrels" / f"{split}.tsv"
    return paths


def _parse_split_qrels(directory: Path, queries: dict, corpus: dict) -> tuple[dict, dict[str, str]]:
    """All splits' qrels, and query id -> split. A query belongs to one split only."""
    qrels, splits = {}, {}
    for split, path in _qrels_paths(directory).items():
        for (query_id, corpus_id), score in _parse_qrels(path, queries, corpus).items():
            if splits.setdefault(query_id, split) != split:
                raise InputError(
                    f"query '{query_id}' is already in the {splits[query_id]} split", file=str(path), field="query-id"
                )
            qrels[query_id, corpus_id] = score
    return qrels, splits


def _parse_qrels(path: Path, queries: dict, corpus: dict) -> dict[tuple[str, str], int]:
    """(query id, corpus id) -> score. An exact repeat is merged; a conflicting score is an error."""
    file, qrels, first_lines = str(path), {}, {}
    rows = read_lines(path)
    header = next(rows, (1, ""))[1]
    if header.split() != QRELS_HEADER:
        raise InputError(f"expected the header '{chr(9).join(QRELS_HEADER)}'", file=file, line=1, field="header")
    for line, row in rows:
        if not row.strip():
            continue
        columns = [column.strip() for column in row.split("\t")]
        if len(columns) != 3:
            raise InputError(f"expected 3 tab-separated columns, got {len(columns)}", file=file, line=line)
        query_id, corpus_id, score_text = columns
        if query_id not in queries:
            raise InputError(f"unknown query id '{query_id}'", file=file, line=line, field="query-id")
        if corpus_id not in corpus:
            raise InputError(f"unknown corpus id '{corpus_id}'", file=file, line=line, field="corpus-id")
        score = parse_integer(score_text, field="score", file=file, line=line, bounds=column_range(Qrel, "relevance"))
        pair = (query_id, corpus_id)
        if pair in qrels and qrels[pair] != score:
            message = f"conflicts with score {qrels[pair]} on line {first_lines[pair]}"
            raise InputError(message, file=file, line=line, field="score")
        qrels[pair] = score
        first_lines.setdefault(pair, line)
    if not qrels:
        raise InputError("no qrels", file=file)
    return qrels


def _parse_pools(path: Path, queries: dict, corpus: dict) -> dict[str, list[str]]:
    """Query id -> its candidate pool (corpus ids in the given order)."""
    file, pools = str(path), {}
    for line, record in read_jsonl(path):
        query_id = _record_id(record, "query-id", path, line, Query)
        if query_id not in queries:
            raise InputError(f"unknown query id '{query_id}'", file=file, line=line, field="query-id")
        if query_id in pools:
            raise InputError(f"a second pool for query '{query_id}'", file=file, line=line, field="query-id")
        corpus_ids = record.get("corpus-ids")
        if not isinstance(corpus_ids, list) or not corpus_ids:
            raise InputError("expected a non-empty array of corpus ids", file=file, line=line, field="corpus-ids")
        for index, corpus_id in enumerate(corpus_ids):
            if not isinstance(corpus_id, (str, int)) or isinstance(corpus_id, bool) or str(corpus_id) not in corpus:
                raise InputError(f"unknown corpus id {corpus_id!r}", file=file, line=line, field=f"corpus-ids[{index}]")
        if len(set(map(str, corpus_ids))) != len(corpus_ids):
            raise InputError("repeats a corpus id", file=file, line=line, field="corpus-ids")
        pools[query_id] = [str(corpus_id) for corpus_id in corpus_ids]
    return pools


def import_beir(directory: str | Path, *, collection_name: str, progress: Progress = no_progress) -> dict:
    """A BEIR-style folder: corpus.jsonl -> passages (no documents; the title kept apart),
    queries.jsonl -> queries, qrels -> qrels (explicit 0 scores kept), optional pools.jsonl ->
    each query's own candidate pool in the given order."""
    directory = Path(directory)
    name = check_new_collection(collection_name)
    if not directory.is_dir():
        raise InputError("not a folder", file=str(directory))
    progress(0.0, "reading corpus")
    corpus = _parse_beir_records(directory / "corpus.jsonl", Passage, with_title=True)
    progress(0.2, "reading queries")
    queries = _parse_beir_records(directory / "queries.jsonl", Query, with_title=False)
    qrels, splits = _parse_split_qrels(directory, queries, corpus)
    pools_path = directory / "pools.jsonl"
    pools = _parse_pools(pools_path, queries, corpus) if pools_path.exists() else {}
    progress(0.3, "checked")

    with transaction.atomic():
        collection = Collection.objects.create(name=name, kind=Collection.Kind.BEIR, source=str(directory))
        passages = [
            (collection.pk, None, record.external_id, record.title, record.text, None, None, ordinal)
            for ordinal, record in enumerate(corpus.values())
        ]
        _insert(Passage, PASSAGE_COLUMNS, passages, progress, (0.3, 0.7), "passages")
        query_rows = [
            (
                collection.pk,
                record.external_id,
                record.text,
                [],
                [],
                None,
                None,
                splits.get(record.external_id, "test"),
                record.metadata,
                ordinal,
            )
            for ordinal, record in enumerate(queries.values())
        ]
        _insert(Query, QUERY_COLUMNS, query_rows, progress, (0.7, 0.8), "queries")
        passage_ids, query_ids = _external_ids(collection.passages), _external_ids(collection.queries)
        qrel_rows = [
            (query_ids[query_id], passage_ids[corpus_id], score) for (query_id, corpus_id), score in qrels.items()
        ]
        _insert(Qrel, QREL_COLUMNS, qrel_rows, progress, (0.8, 0.9), "qrels")
        pool_rows = [
            (query_ids[query_id], passage_ids[corpus_id], position)
            for query_id, pool in pools.items()
            for position, corpus_id in enumerate(pool)
        ]
        _insert(PoolEntry, POOL_COLUMNS, pool_rows, progress, (0.9, 1.0), "pools")
        refresh_import_statistics()
    warm_term_counts(collection)
    progress(1.0, "done")
    return {"collection": name, "queries": len(queries), "passages": len(corpus), "qrels": len(qrels)}
