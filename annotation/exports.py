"""Judgment exports as text, a chunk at a time: JSON (one array), CSV (a header, then a row per
judgment; lists and objects as JSON) and JSON lines. The REST view and `export_judgments` stream
these chunks, so a study of any size is never one string in memory."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence

from django.db.models import QuerySet

from .models import Item, Study
from .selectors import JSON_JUDGMENT_COLUMNS, JUDGMENT_COLUMNS, judgment_rows

JUDGMENT_FORMATS = ("json", "csv", "jsonl")
ROWS_PER_CHUNK = 500


def _batches(rows: Iterable[dict]) -> Iterator[list[dict]]:
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == ROWS_PER_CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def csv_chunks(
    rows: Iterable[dict], columns: Sequence[str] = JUDGMENT_COLUMNS, json_columns: Sequence[str] = JSON_JUDGMENT_COLUMNS
) -> Iterator[str]:
    """A header of `columns`, then a line per row; the `json_columns` (lists, objects) as JSON."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for batch in _batches(rows):
        for row in batch:
            writer.writerow({**row, **{key: "" if row[key] is None else json.dumps(row[key]) for key in json_columns}})
        yield out.getvalue()
        out.seek(0)
        out.truncate()
    yield out.getvalue()


def jsonl_chunks(rows: Iterable[dict]) -> Iterator[str]:
    for batch in _batches(rows):
        yield "".join(json.dumps(row, sort_keys=True) + "\n" for row in batch)


def json_chunks(rows: Iterable[dict]) -> Iterator[str]:
    """One JSON array, written element by element."""
    separator = "["
    for batch in _batches(rows):
        yield separator + ",".join(json.dumps(row, sort_keys=True) for row in batch)
        separator = ","
    yield "[]" if separator == "[" else "]"


CHUNKS = {"json": json_chunks, "csv": csv_chunks, "jsonl": jsonl_chunks}


def judgment_export(study: Study, export_format: str, items: QuerySet[Item] | None = None) -> Iterator[str]:
    """The study's judgments (judgment_rows; only `items`' when given) in `export_format`, as
    text chunks."""
    return CHUNKS[export_format](judgment_rows(study, items))


def rows_export(
    rows: Iterable[dict], export_format: str, columns: Sequence[str], json_columns: Sequence[str] = ()
) -> Iterator[str]:
    """Any table's rows in one of JUDGMENT_FORMATS, written as the judgment exports are (the data
    manager exports a collection's queries this way)."""
    if export_format == "csv":
        return csv_chunks(rows, columns, json_columns)
    return CHUNKS[export_format](rows)
