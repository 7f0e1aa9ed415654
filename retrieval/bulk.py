"""Rows inserted at the database's own speed: one statement shape for a whole batch, no model
instance per row (building and compiling those cost imports and runs more than the inserts).
On Postgres a COPY fed row by row; elsewhere one `executemany` of a single INSERT. Values go in
as the columns store them: JSON columns are given Python values and written as JSON text."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from django.db import connection, models


def insert_rows(model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence]) -> None:
    """Insert `rows` (tuples in the order of `columns`, attribute names such as "document_id")
    into `model`'s table, inside the caller's transaction."""
    fields = [model._meta.get_field(column) for column in columns]
    as_json = [index for index, field in enumerate(fields) if isinstance(field, models.JSONField)]
    if as_json:
        rows = (
            tuple(json.dumps(value) if index in as_json else value for index, value in enumerate(row)) for row in rows
        )
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    names = ", ".join(quote(field.column) for field in fields)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            placeholders = ", ".join(["%s"] * len(columns))
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({placeholders})", list(rows))
