"""Judgment exports as text, a chunk at a time: JSON (one array), CSV (a header, then a row per
judgment; lists and objects as JSON) and JSON lines. The REST view and `export_judgments` stream
these chunks, so a study of any size is never one string in memory."""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Iterable, Iterator

from .models import Study
from .selectors import JSON_JUDGMENT_COLUMNS, JUDGMENT_COLUMNS, POST_EDITING_COLUMNS, judgment_rows

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


def csv_chunks(rows: Iterable[dict]) -> Iterator[str]:
    """CSV with JUDGMENT_COLUMNS, and a post-editing study's two columns after them when its
    rows carry them (annotation.selectors.judgment_rows)."""
    rows = iter(rows)
    first = next(rows, None)
    extra = tuple(key for key in POST_EDITING_COLUMNS if isinstance(first, dict) and key in first)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=JUDGMENT_COLUMNS + extra, lineterminator="\n")
    writer.writeheader()
    for batch in _batches(itertools.chain([first] if first is not None else [], rows)):
        for row in batch:
            writer.writerow(
                {**row, **{key: "" if row[key] is None else json.dumps(row[key]) for key in JSON_JUDGMENT_COLUMNS}}
            )
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


def judgment_export(study: Study, export_format: str) -> Iterator[str]:
    """The study's judgments (judgment_rows) in `export_format`, as text chunks."""
    return CHUNKS[export_format](judgment_rows(study))
