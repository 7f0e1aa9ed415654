"""Judgment exports as text, a chunk at a time: JSON (one array), CSV (a header, then a row per
judgment; lists and objects as JSON) and JSON lines. The REST view and `export_judgments` stream
these chunks, so a study of any size is never one string in memory.

Each row also says what its item's label is and where it comes from (annotation.provenance):
`item_label`, `label_source` (adjudicated, unanimous, single, aggregated, sent_back, unjudged),
`label_method` (majority, for an aggregated label) and `reworks` (times the item was sent back);
null on hidden gold and qualification items, whose answers are known."""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence

from django.db.models import QuerySet

from .models import Item, Study
from .provenance import item_labels
from .selectors import JSON_JUDGMENT_COLUMNS, JUDGMENT_COLUMNS, POST_EDITING_COLUMNS, judgment_rows

JUDGMENT_FORMATS = ("json", "csv", "jsonl")
ROWS_PER_CHUNK = 500
PROVENANCE_COLUMNS = ("item_label", "label_source", "label_method", "reworks")
EXPORT_COLUMNS = (*JUDGMENT_COLUMNS, *PROVENANCE_COLUMNS)
JSON_EXPORT_COLUMNS = (*JSON_JUDGMENT_COLUMNS, "item_label")
NOT_LABELLED = dict.fromkeys(PROVENANCE_COLUMNS)


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
    rows: Iterable[dict], columns: Sequence[str] | None = None, json_columns: Sequence[str] = JSON_EXPORT_COLUMNS
) -> Iterator[str]:
    """A header of `columns`, then a line per row; the `json_columns` (lists, objects) as JSON.
    Without `columns`, the judgment export's: EXPORT_COLUMNS, and a post-editing study's two
    columns after them when its rows carry them (annotation.selectors.judgment_rows)."""
    rows = iter(rows)
    first = next(rows, None)
    if columns is None:
        extra = tuple(key for key in POST_EDITING_COLUMNS if isinstance(first, dict) and key in first)
        columns = (*EXPORT_COLUMNS, *extra)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for batch in _batches(itertools.chain([first] if first is not None else [], rows)):
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


def labelled_rows(study: Study, items: QuerySet[Item] | None = None) -> Iterator[dict]:
    """judgment_rows (only `items`' when given), each with its item's label and provenance (read
    first, in a fixed number of statements: the work items' ids, their counted answers,
    adjudications and send-backs)."""
    work = Item.objects.filter(study=study, role=Item.Role.WORK)
    if items is not None:
        work = work.filter(pk__in=items.values("pk"))
    ids = work.values_list("pk", flat=True)
    labels = {item: label.fields() for item, label in item_labels(study, ids.iterator(10_000)).items()}
    for row in judgment_rows(study, items):
        yield {**row, **labels.get(row["item"], NOT_LABELLED)}


def judgment_export(study: Study, export_format: str, items: QuerySet[Item] | None = None) -> Iterator[str]:
    """The study's judgments (labelled_rows; only `items`' when given) in `export_format`, as
    text chunks."""
    return CHUNKS[export_format](labelled_rows(study, items))


def rows_export(
    rows: Iterable[dict], export_format: str, columns: Sequence[str], json_columns: Sequence[str] = ()
) -> Iterator[str]:
    """Any table's rows in one of JUDGMENT_FORMATS, written as the judgment exports are (the data
    manager exports a collection's queries this way)."""
    if export_format == "csv":
        return csv_chunks(rows, columns, json_columns)
    return CHUNKS[export_format](rows)
