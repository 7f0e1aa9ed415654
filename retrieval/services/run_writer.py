"""Storing a run's hits and gold ranks at the database's own insert speed.

A run stores about a hundred hits per query: at a million queries, building a model instance per
hit would cost more than all of the scoring. Hits arrive as numpy columns and leave through one
statement shape per table: on Postgres a binary COPY whose rows numpy lays out in one pass (no
Python object per hit, doubles sent bit for bit), elsewhere one `executemany` of a single
INSERT (retrieval/bulk.py). Shards on Postgres write their hits concurrently, each in its own
transactions; on SQLite every writer takes the database's one write lock in turn (IMMEDIATE
transactions), so shards' writes queue behind one another there.
"""

from __future__ import annotations

import numpy as np
from django.db import connection, transaction

from retrieval.bulk import insert_rows
from retrieval.models import Hit, RunQuery

HIT_COLUMNS = ("run_id", "query_id", "passage_id", "rank", "score")
RUN_QUERY_COLUMNS = ("run_id", "query_id", "candidates", "gold_rank", "relevant_ranks")
# Postgres binary COPY: a field is its length (int32) and its value in network byte order.
BINARY_TYPES = {"bigint": ">i8", "integer": ">i4", "smallint": ">i2", "double precision": ">f8"}
BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, header extension length
BINARY_TRAILER = b"\xff\xff"


def _binary_rows(columns: tuple[str, ...], values: list[np.ndarray]) -> bytes:
    """The rows of a binary COPY into the hits table, laid out by numpy: a row is the field
    count, then each field's byte length and value, big-endian, in the columns' database types."""
    types = [BINARY_TYPES[Hit._meta.get_field(column).db_type(connection)] for column in columns]
    layout = [("fields", ">i2")]
    for number, kind in enumerate(types):
        layout += [(f"length{number}", ">i4"), (f"value{number}", kind)]
    rows = np.empty(len(values[0]), dtype=layout)
    rows["fields"] = len(columns)
    for number, (kind, column) in enumerate(zip(types, values)):
        rows[f"length{number}"] = np.dtype(kind).itemsize
        rows[f"value{number}"] = column
    return rows.tobytes()


def insert_hits(run_id: int, query_ids: np.ndarray, passage_ids: np.ndarray, ranks: np.ndarray, scores: np.ndarray):
    """Insert hits given as equal-length columns (one row per hit)."""
    if not len(query_ids):
        return
    values = [np.full(len(query_ids), run_id, dtype=np.int64), query_ids, passage_ids, ranks, scores]
    if connection.vendor != "postgresql":
        insert_rows(Hit, HIT_COLUMNS, zip(*(np.asarray(column).tolist() for column in values)))
        return
    quote = connection.ops.quote_name
    columns = ", ".join(map(quote, HIT_COLUMNS))
    statement = f"COPY {quote(Hit._meta.db_table)} ({columns}) FROM STDIN (FORMAT BINARY)"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        copy.write(BINARY_HEADER + _binary_rows(HIT_COLUMNS, values) + BINARY_TRAILER)


class RunWriter:
    """Buffers a run's hits (as numpy blocks) and gold ranks and writes them in few transactions:
    a commit per candidate set would cost more than ranking a BIRCO pool. The buffer is bounded,
    so memory stays bounded by FLUSH_ROWS, not by the run or the shard."""

    FLUSH_ROWS = 200_000

    def __init__(self, run_id: int):
        self.run_id = run_id
        self.blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.buffered = 0
        self.run_queries: list[tuple[int, int, int, int | None, dict]] = []

    def add_ranked(self, query_ids: np.ndarray, passage_ids: np.ndarray, scores: np.ndarray) -> None:
        """Hits of ranked rows: row i of `passage_ids` and `scores` (best first) is query i's."""
        rows, depth = passage_ids.shape
        ranks = np.broadcast_to(np.arange(1, depth + 1, dtype=np.int64), (rows, depth))
        self.add_hits(np.repeat(query_ids, depth), passage_ids.ravel(), ranks.ravel(), scores.ravel())

    def add_hits(self, query_ids, passage_ids, ranks, scores) -> None:
        """Hits as equal-length columns."""
        block = tuple(np.asarray(column) for column in (query_ids, passage_ids, ranks, scores))
        self.blocks.append(block)
        self.buffered += len(block[0])
        if self.buffered >= self.FLUSH_ROWS:
            self.flush()

    def add_query(self, query_id: int, candidates: int, relevant_ranks: dict[str, int]) -> None:
        """A query's candidate-set size and the exact rank of each of its relevant passages."""
        gold_rank = min(relevant_ranks.values(), default=None)
        self.run_queries.append((self.run_id, query_id, candidates, gold_rank, relevant_ranks))

    def flush(self) -> None:
        columns = [np.concatenate(parts) for parts in zip(*self.blocks)] if self.blocks else [[]] * 4
        with transaction.atomic():
            insert_hits(self.run_id, *columns)
            insert_rows(RunQuery, RUN_QUERY_COLUMNS, self.run_queries)
        self.blocks, self.buffered, self.run_queries = [], 0, []
