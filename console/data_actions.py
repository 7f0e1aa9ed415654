"""The data manager's actions, as the pages and REST both take them: a bulk action (void, send
back) or an export on the rows chosen by hand or on every row matching the table's filter.
Parameters are read here (console.data_filters, InputError naming the field); the rules are
annotation.services.rework's and the exports annotation.exports' and retrieval.selectors'."""

from __future__ import annotations

from collections.abc import Iterator

from django.http import StreamingHttpResponse

from annotation.exports import JUDGMENT_FORMATS, judgment_export, rows_export
from annotation.models import Study
from annotation.services.rework import BulkResult, send_back, void_judgments
from console.data_filters import choice, selected_ids
from console.data_queries import (
    collection_query_filters,
    filtered_collection_queries,
    filtered_run_queries,
    run_query_filters,
)
from console.data_selectors import bulk_annotator, selected_items
from retrieval.errors import InputError
from retrieval.models import Collection, Query, Run, RunQuery
from retrieval.selectors import relevant_rank_lines, trec_run_lines
from retrieval.serializers import QuerySerializer

SCOPES = ("selected", "matching")
BULK_ACTIONS = ("void", "send_back")
RUN_EXPORT_FORMATS = ("trec", "ranks")
# A collection's queries export in /api/queries/'s shape; lists and objects are JSON in CSV.
QUERY_COLUMNS = tuple(QuerySerializer.Meta.fields)
JSON_QUERY_COLUMNS = ("left_context", "right_context", "metadata")


def chosen_ids(params, chosen) -> list[int] | None:
    """The ids chosen by hand (`chosen`: the form's or body's list), or None for every row
    matching the filter (`scope=matching`). Choosing nothing by hand is refused."""
    if (choice(params, "scope", SCOPES) or "selected") == "matching":
        return None
    ids = selected_ids(chosen if chosen is not None else [])
    if not ids:
        raise InputError("choose at least one row, or act on all rows matching the filter", field="items")
    return ids


def bulk_action(study: Study, params, chosen, *, by) -> BulkResult:
    """Void the chosen items' live judgments (only the annotator the table is filtered on, if
    any) or send the items back to the queue, with the reason given."""
    action = choice(params, "action", BULK_ACTIONS)
    if not action:
        raise InputError(f"one of {', '.join(BULK_ACTIONS)}", field="action")
    items = selected_items(study, params, ids=chosen_ids(params, chosen))
    reason = params.get("reason", "")
    if action == "void":
        return void_judgments(study, items, by=by, reason=reason, annotator=bulk_annotator(params))
    return send_back(study, items, by=by, reason=reason)


def export_format(params, formats: tuple[str, ...]) -> str:
    wanted = choice(params, "format", formats)
    if not wanted:
        raise InputError(f"one of {', '.join(formats)}", field="format")
    return wanted


def item_export(study: Study, params, chosen) -> tuple[str, Iterator[str]]:
    """The chosen items' judgments in the judgment export's shape and the format's name."""
    wanted = export_format(params, JUDGMENT_FORMATS)
    items = selected_items(study, params, ids=chosen_ids(params, chosen))
    return wanted, judgment_export(study, wanted, items)


def run_query_export(run: Run, params, chosen) -> tuple[str, Iterator[str]]:
    """The chosen queries' hits as TREC run lines (`trec`) or their exact relevant ranks as
    `export_run --ranks` writes them (`ranks`). `chosen` are per-query result ids (the table's)."""
    wanted = export_format(params, RUN_EXPORT_FORMATS)
    ids = chosen_ids(params, chosen)
    results = (
        RunQuery.objects.filter(run=run, pk__in=ids)
        if ids is not None
        else filtered_run_queries(run, run_query_filters(params))
    )
    queries = Query.objects.filter(pk__in=results.order_by().values("query_id"))
    lines = trec_run_lines(run, queries) if wanted == "trec" else relevant_rank_lines(run, queries)
    return wanted, (line + "\n" for line in lines)


def collection_query_export(collection: Collection, params, chosen) -> tuple[str, Iterator[str]]:
    """The chosen queries in /api/queries/'s shape, as JSON, CSV or JSON lines."""
    wanted = export_format(params, JUDGMENT_FORMATS)
    ids = chosen_ids(params, chosen)
    queries = (
        Query.objects.filter(collection=collection, pk__in=ids).order_by("ordinal", "pk")
        if ids is not None
        else filtered_collection_queries(collection, collection_query_filters(params))
    )
    rows = (QuerySerializer(query).data for query in queries.iterator(chunk_size=2000))
    return wanted, rows_export(rows, wanted, QUERY_COLUMNS, JSON_QUERY_COLUMNS)


MEDIA_TYPES = {
    "json": "application/json",
    "csv": "text/csv",
    "jsonl": "application/x-ndjson",
    "trec": "text/plain",
    "ranks": "application/x-ndjson",
}
SUFFIXES = {"ranks": "ranks.jsonl"}


def download(chunks: Iterator[str], stem: str, wanted: str) -> StreamingHttpResponse:
    """A streamed attachment named `stem`.<format>: the pages and REST answer exports alike."""
    response = StreamingHttpResponse(chunks, content_type=f"{MEDIA_TYPES[wanted]}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{stem}.{SUFFIXES.get(wanted, wanted)}"'
    return response
