"""Qrels from any source, in one shape: every judged (query, passage) pair of a collection with
its relevance, non-relevant judgments included, as a TREC qrels file holds them. Every table
(evaluate_run, coverage, leaderboards, leave-one-run-out, the collection bundle) reads its
labels through `load_qrels`, so they are computed by the same code whoever made the labels.

Sources are named by one string:
- `imported`: the collection's own qrels (import_beir, import_relic, a qrels upload);
- `study:ID` (or `study:ID:mean|median|majority`): a relevance study's aggregated labels;
- `judge:NAME`: a judge's labels.
The last two live in apps above retrieval (imports flow one way), which register them when they
start (`register_qrels_source`, as rerankers do), naming their loaders by dotted path so that
a process that never asks for them never loads what they compute with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from django.utils.module_loading import import_string

from .errors import InputError
from .models import Collection, Passage, Qrel, Query

IMPORTED = "imported"


@dataclass(frozen=True)
class Qrels:
    """A collection's judged pairs under one source. `judgments` maps query id -> passage id ->
    relevance (database ids). `exact_ranks`: the runs' stored ranks of relevant passages
    (RunQuery.relevant_ranks, over the whole candidate set) refer to these qrels, which holds
    for the imported qrels only."""

    collection: Collection
    source: str
    label: str
    judgments: Mapping[int, Mapping[int, int]]
    exact_ranks: bool = False
    details: dict = field(default_factory=dict)
    origin: object = None  # what made the labels (a Study, a Judge), for exports that describe it

    @property
    def pairs(self) -> int:
        return sum(len(passages) for passages in self.judgments.values())

    @property
    def has_non_relevant(self) -> bool:
        """Whether any pair was judged not relevant: a judged pool, not a list of golds (RELiC's
        qrels name only the gold; everything else is non-relevant by design, so coverage means
        nothing there)."""
        return any(relevance <= 0 for passages in self.judgments.values() for relevance in passages.values())

    def without(self, pairs: Iterable[tuple[int, int]], label: str) -> Qrels:
        """These qrels less some (query id, passage id) pairs (leave-one-run-out). Queries keep
        their place even when all their pairs go: the judged query set does not change."""
        removed: dict[int, set[int]] = {}
        for query_id, passage_id in pairs:
            removed.setdefault(query_id, set()).add(passage_id)
        judgments = {
            query_id: {pk: relevance for pk, relevance in passages.items() if pk not in removed.get(query_id, ())}
            for query_id, passages in self.judgments.items()
        }
        return Qrels(self.collection, self.source, label, judgments, details=self.details, origin=self.origin)

    def triples(self) -> Iterator[tuple[str, str, int]]:
        """(query external id, passage external id, relevance) in the collection's query and
        passage order."""
        queries = self.collection.queries.order_by("ordinal", "pk").values_list("pk", "external_id")
        passage_ids = {pk for passages in self.judgments.values() for pk in passages}
        passages = external_ids(Passage.objects.filter(collection=self.collection), passage_ids)
        for query_id, query in queries.iterator(chunk_size=5000):
            judged = self.judgments.get(query_id, {})
            for passage_id in sorted(judged, key=lambda pk: passages[pk][1]):
                yield query, passages[passage_id][0], judged[passage_id]

    def trec_lines(self) -> Iterator[str]:
        """`qid 0 docid relevance` lines in the collection's query and passage order."""
        for query, passage, relevance in self.triples():
            yield f"{query} 0 {passage} {relevance}"


CHUNK = 500  # ids per IN list (SQLite refuses very long ones)


def rows_for(queryset, field_name: str, values: Iterable, *columns: str) -> Iterator[tuple]:
    """`columns` of the rows of `queryset` whose `field_name` is among `values`, a chunk of ids
    per query."""
    values = list(values)
    for start in range(0, len(values), CHUNK):
        yield from queryset.filter(**{f"{field_name}__in": values[start : start + CHUNK]}).values_list(*columns)


def external_ids(passages, wanted: set[int]) -> dict[int, tuple[str, int]]:
    """passage id -> (external id, import ordinal) for the wanted ids of a passage queryset."""
    columns = ("pk", "external_id", "ordinal")
    return {pk: (external_id, ordinal) for pk, external_id, ordinal in rows_for(passages, "pk", wanted, *columns)}


@dataclass(frozen=True)
class QrelsSource:
    """A kind of qrels an app above retrieval offers: `prefix:ARGUMENT`. `load` and `choices`
    are dotted paths: load(collection, argument) -> Qrels; choices(collection) -> [(source,
    label)], the sources of this kind a collection has now (for the pages' menus)."""

    prefix: str
    help: str
    load: str
    choices: str


QRELS_SOURCES: dict[str, QrelsSource] = {}


def register_qrels_source(source: QrelsSource) -> None:
    QRELS_SOURCES[source.prefix] = source


def source_help() -> str:
    return ", ".join([IMPORTED, *(source.help for source in QRELS_SOURCES.values())])


def imported_qrels(collection: Collection, query_ids: Iterable[int] | None = None) -> Qrels:
    """The collection's own qrels; of `query_ids` only when given (one page of queries)."""
    judgments: dict[int, dict[int, int]] = {}
    rows = Qrel.objects.filter(query__collection=collection)
    if query_ids is not None:
        rows = rows.filter(query_id__in=list(query_ids))
    rows = rows.values_list("query_id", "passage_id", "relevance")
    for query_id, passage_id, relevance in rows.iterator(chunk_size=20_000):
        judgments.setdefault(query_id, {})[passage_id] = relevance
    return Qrels(collection, IMPORTED, "the collection's qrels", judgments, exact_ranks=True)


def source_name(source: str | None) -> str:
    """A qrels source as given (an option, a form field, a query parameter), read the one way:
    stripped, and the collection's imported qrels when empty or absent."""
    return (source or IMPORTED).strip()


def load_qrels(collection: Collection, source: str | None = None) -> Qrels:
    """The qrels `source` names on `collection` (default: imported). An unknown or malformed
    source is an InputError on the field `qrels`."""
    source = source_name(source)
    if source == IMPORTED:
        return imported_qrels(collection)
    prefix, _, argument = source.partition(":")
    kind = QRELS_SOURCES.get(prefix)
    if kind is None or not argument:
        raise InputError(f"unknown qrels source {source!r}; use {source_help()}", field="qrels")
    return import_string(kind.load)(collection, argument)


def qrels_choices(collection: Collection) -> list[tuple[str, str]]:
    """Every qrels source this collection has now, as (source, label), imported first."""
    choices = [(IMPORTED, "the collection's qrels")]
    for kind in QRELS_SOURCES.values():
        choices += import_string(kind.choices)(collection)
    return choices


def judgments_from_external_ids(
    collection: Collection, labels: Mapping[tuple[str, str], int], describe: Callable[[str], str]
) -> dict[int, dict[int, int]]:
    """query id -> passage id -> relevance from labels keyed by (query external id, passage
    external id); an id the collection does not hold is an InputError (`describe` names it)."""
    queries = dict(Query.objects.filter(collection=collection).values_list("external_id", "pk"))
    wanted = {passage for _, passage in labels}
    passages = dict(rows_for(Passage.objects.filter(collection=collection), "external_id", wanted, "external_id", "pk"))
    judgments: dict[int, dict[int, int]] = {}
    for (query, passage), relevance in labels.items():
        if query not in queries or passage not in passages:
            missing = f"query {query!r}" if query not in queries else f"passage {passage!r}"
            raise InputError(describe(f"{missing} is not in collection {collection.name}"), field="qrels")
        judgments.setdefault(queries[query], {})[passages[passage]] = relevance
    return judgments
