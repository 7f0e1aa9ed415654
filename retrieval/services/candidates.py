"""Candidate sets: which passages each query is ranked against.

RELiC ranks a quote's context against every window of the same book and the same length as the
gold quote; BIRCO gives each query its own pool; plain BEIR ranks against the whole collection.
Queries that share a set are scored together, so a retriever builds one index (BM25) or encodes
the passages once (dense) per set.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from django.db.models import QuerySet

from retrieval.chunks import chunks
from retrieval.models import Collection, Passage, PoolEntry, Query


class PassageRow(NamedTuple):
    """A read-only passage as scorers and rankings need it, loaded without building model
    instances (ten times cheaper for a collection-wide set). Field names are Passage's, so code
    written for Passage objects reads it unchanged."""

    pk: int
    collection_id: int
    document_id: int | None
    external_id: str
    title: str
    text: str
    start: int | None
    length: int | None
    ordinal: int

    retrieval_text = Passage.retrieval_text

    @property
    def id(self) -> int:
        return self.pk


@dataclass
class CandidateSet:
    """The passages `queries` are ranked against. Their order breaks score ties: window start,
    pool position, or import order."""

    description: str
    queries: list[Query]
    queryset: QuerySet  # the set's passages, already in order unless `pool` gives the order
    pool: list[int] | None = None  # passage ids in pool order

    def values(self, fields: Sequence[str]) -> list[tuple]:
        """The passages' `fields` (which must include "pk") as tuples, in the set's order."""
        rows = list(self.queryset.values_list(*fields))
        if self.pool is None:
            return rows
        key = list(fields).index("pk")
        by_id = {row[key]: row for row in rows}
        return [by_id[passage_id] for passage_id in self.pool]

    def passages(self) -> list[PassageRow]:
        return [PassageRow._make(row) for row in self.values(PassageRow._fields)]

    def size(self) -> int:
        """How many passages the set has (a pool without loading it; a count query otherwise)."""
        return len(self.pool) if self.pool is not None else self.queryset.count()


def load_passages(sets: Sequence[CandidateSet]) -> list[list[PassageRow]]:
    """Each set's passages in its order. Pools are read together, a chunk of ids per statement,
    rather than one statement per pool (a BIRCO run has a pool per query)."""
    pooled = list(dict.fromkeys(passage_id for s in sets if s.pool is not None for passage_id in s.pool))
    rows = {}
    for chunk in chunks(pooled):
        rows.update(
            (row[0], PassageRow._make(row))
            for row in Passage.objects.filter(pk__in=chunk).order_by().values_list(*PassageRow._fields)
        )
    return [s.passages() if s.pool is None else [rows[passage_id] for passage_id in s.pool] for s in sets]


def candidate_sets(collection: Collection, queries: Iterable[Query] | None = None) -> list[CandidateSet]:
    """The candidate sets of `queries` (default: all the collection's queries), each with the
    queries it serves, in query order. Passages load only when asked for (`passages()`,
    `values()`), so a run holds one set in memory at a time."""
    entries = PoolEntry.objects.filter(query__collection=collection).order_by("query_id", "position")
    if queries is None:
        queries, batches = list(collection.queries.order_by("ordinal")), [entries]
    else:  # only these queries' pools (a shard's)
        queries = list(queries)
        batches = [entries.filter(query_id__in=chunk) for chunk in chunks([query.pk for query in queries])]
    pools: dict[int, list[int]] = {}
    for batch in batches:
        for query_id, passage_id in batch.values_list("query_id", "passage_id"):
            pools.setdefault(query_id, []).append(passage_id)

    sets: dict[tuple, CandidateSet] = {}
    for query in queries:
        if query.document_id is not None and query.quote_length:
            key = ("book", query.document_id, query.quote_length)
            if key not in sets:
                windows = Passage.objects.filter(document_id=query.document_id, length=query.quote_length)
                sets[key] = CandidateSet(
                    f"{query.quote_length}-sentence windows of document {query.document_id}",
                    [],
                    windows.order_by("start", "ordinal"),
                )
        elif query.pk in pools:
            key = ("pool", query.pk)
            sets[key] = CandidateSet(
                f"pool of query {query.external_id}",
                [],
                Passage.objects.filter(pk__in=pools[query.pk]),
                pools[query.pk],
            )
        else:
            key = ("collection",)
            if key not in sets:
                sets[key] = CandidateSet(
                    f"all passages of {collection.name}", [], collection.passages.order_by("ordinal")
                )
        sets[key].queries.append(query)
    return list(sets.values())
