"""The data manager over REST, staff only, calling the functions the pages call
(console.data_selectors, data_queries, data_actions): the tables as pages of rows (`?page=N
&per_page=25|50|100|200` and every filter of the page as a parameter: `{count, page, pages,
per_page, filters, results}`), a row's detail, jump, the bulk actions (void, send back) on the
ids given or on every row matching the filters, exports of the same, and the study's revision
setting. A refused parameter is a 400 naming it (InputError, through retrieval.api's handler)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import IsAdminUser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.exports import JUDGMENT_FORMATS
from annotation.models import Study
from console.data_actions import (
    RUN_EXPORT_FORMATS,
    SCOPES,
    bulk_action,
    collection_query_export,
    download,
    item_export,
    run_query_export,
)
from console.data_queries import (
    collection_query_detail,
    collection_query_jump,
    collection_query_table,
    run_query_detail,
    run_query_jump,
    run_query_table,
)
from console.data_selectors import item_detail, item_of, item_table, jump_target
from retrieval.fields import AsciiIntegerField
from retrieval.models import Collection, Query, Run, RunQuery

EXPORT_RESPONSES = {
    (200, media): OpenApiTypes.STR for media in ("application/json", "text/csv", "application/x-ndjson", "text/plain")
}
TABLE_PARAMETERS = [OpenApiParameter("page", int), OpenApiParameter("per_page", int)]
SELECTION_PARAMETERS = [
    OpenApiParameter("scope", str, enum=list(SCOPES), description="selected (the ids in `items`) or matching"),
    OpenApiParameter("items", str, description="comma-separated ids, for scope=selected"),
]
BulkRequest = inline_serializer(
    "DataBulkRequest",
    {
        "scope": serializers.ChoiceField(choices=list(SCOPES), required=False),
        "items": serializers.ListField(child=AsciiIntegerField(), required=False),
        "reason": serializers.CharField(),
        "status": serializers.CharField(required=False),
        "agreement": serializers.CharField(required=False),
        "flagged": serializers.CharField(required=False),
        "annotator": serializers.CharField(required=False),
        "judge": serializers.CharField(required=False),
        "adjudicated": serializers.CharField(required=False),
        "role": serializers.CharField(required=False),
        "search": serializers.CharField(required=False),
    },
)


class StaffView(APIView):
    permission_classes = [IsAdminUser]


class ExportView(StaffView):
    """An export streams its own body; `?format=` names the export's format, not a DRF renderer,
    and errors answer JSON."""

    def perform_content_negotiation(self, request, force=False):
        return JSONRenderer(), JSONRenderer.media_type


def table_response(table: dict) -> Response:
    page = table["page"]
    return Response(
        {
            "count": page.paginator.count,
            "page": page.number,
            "pages": page.paginator.num_pages,
            "per_page": page.paginator.per_page,
            "filters": table["filters"].as_params(),
            "results": table["rows"],
        }
    )


def _body(request) -> dict:
    if not isinstance(request.data, dict):
        raise ValidationError({"non_field_errors": ["send a JSON object"]})
    return request.data


def _selection(request) -> list | str | None:
    return request.query_params.get("items")


# --- a study's items -----------------------------------------------------------------------------------


class StudyItemsView(StaffView):
    """The study's items, filtered (status, agreement, flagged, annotator, judge, adjudicated,
    role, search), sorted (`sort`) and paged, as the data manager's table shows them."""

    @extend_schema(
        operation_id="studies_data_items_list", parameters=TABLE_PARAMETERS, responses={200: OpenApiTypes.OBJECT}
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        return table_response(item_table(study, request.query_params))


class StudyItemView(StaffView):
    """One item in full: candidates with gold and provenance, every judgment (voided ones too)
    with seconds, rationale, spans, earlier answers, void and rework, peer reviews; flags,
    adjudication, judges' answers."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id, item_id):
        study = get_object_or_404(Study, pk=study_id)
        item = item_of(study, item_id)
        if item is None:
            raise NotFound("no such item in this study")
        return Response(item_detail(study, item))


class StudyJumpView(StaffView):
    """The item at `?jump=N` (position from 1) or, with `jump_by=item`, of id N."""

    @extend_schema(
        parameters=[OpenApiParameter("jump", int, required=True), OpenApiParameter("jump_by", str)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, study_id):
        item = jump_target(get_object_or_404(Study, pk=study_id), request.query_params)
        return Response({"item": item.pk, "position": item.position, "number": item.position + 1})


class StudyVoidView(StaffView):
    """Void the live judgments of the items given (`items`) or of all matching the filters
    (`scope: matching`), with `reason`; only the `annotator` filter's judgments when it is set."""

    action = "void"

    @extend_schema(request=BulkRequest, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        data = _body(request)
        result = bulk_action(study, {**data, "action": self.action}, data.get("items"), by=request.user)
        return Response({"action": self.action, **result.summary()})


class StudySendBackView(StudyVoidView):
    """Send the items given (or all matching) back to the queue: every live judgment of theirs is
    voided and any decision withdrawn, one Rework per item as the adjudication workspace records
    a send-back, so all their slots reopen. Answers `items` (sent back), `voided` and
    `withdrawn_decisions`."""

    action = "send_back"


class StudyExportView(ExportView):
    """The judgments of the items given (`items=1,2,3`) or of all matching the filters, in the
    judgment export's shape (`format=json|csv|jsonl`)."""

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=list(JUDGMENT_FORMATS)), *SELECTION_PARAMETERS],
        responses=EXPORT_RESPONSES,
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        wanted, chunks = item_export(study, request.query_params, _selection(request))
        return download(chunks, f"study-{study.pk}-selection-judgments", wanted)


class StudyRevisionsSettingView(StaffView):
    """Whether annotators may revise their earlier answers in the study (`allow_revisions`)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        return Response({"study": study.pk, "allow_revisions": study.allow_revisions})

    @extend_schema(
        request=inline_serializer("RevisionsSetting", {"allow_revisions": serializers.BooleanField()}),
        responses={200: OpenApiTypes.OBJECT},
    )
    def put(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        allowed = _body(request).get("allow_revisions")
        if not isinstance(allowed, bool):
            raise ValidationError({"allow_revisions": ["true or false"]})
        Study.objects.filter(pk=study.pk).update(allow_revisions=allowed)
        return Response({"study": study.pk, "allow_revisions": allowed})


# --- a run's queries -------------------------------------------------------------------------------------


class RunQueriesView(StaffView):
    """The run's queries (relevant, min_rank, max_rank, split, quote_length, judged, search,
    sort), paged."""

    @extend_schema(
        operation_id="runs_data_queries_list", parameters=TABLE_PARAMETERS, responses={200: OpenApiTypes.OBJECT}
    )
    def get(self, request, run_id):
        return table_response(run_query_table(get_object_or_404(Run, pk=run_id), request.query_params))


class RunQueryView(StaffView):
    """One query of the run: its ranking with the qrels and the human judgments beside each
    passage, and the relevant passages past the stored depth."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, run_id, query_id):
        run = get_object_or_404(Run, pk=run_id)
        if not RunQuery.objects.filter(run=run, query_id=query_id).exists():
            raise NotFound("the run has no result for this query")
        return Response(run_query_detail(run, Query.objects.get(pk=query_id)))


class RunQueryJumpView(StaffView):
    """The run's query at `?jump=N` (position from 1) or, with `jump_by=query`, of that external id."""

    @extend_schema(
        parameters=[OpenApiParameter("jump", str, required=True), OpenApiParameter("jump_by", str)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, run_id):
        query = run_query_jump(get_object_or_404(Run, pk=run_id), request.query_params)
        return Response({"query": query.pk, "external_id": query.external_id})


class RunQueriesExportView(ExportView):
    """The queries given (`items`: the table's per-query result ids) or all matching, as TREC run
    lines (`format=trec`) or `export_run --ranks` lines (`format=ranks`)."""

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=list(RUN_EXPORT_FORMATS)), *SELECTION_PARAMETERS],
        responses=EXPORT_RESPONSES,
    )
    def get(self, request, run_id):
        run = get_object_or_404(Run.objects.select_related("retriever"), pk=run_id)
        wanted, chunks = run_query_export(run, request.query_params, _selection(request))
        return download(chunks, f"{run.tag}-selection", wanted)


# --- a collection's queries ------------------------------------------------------------------------------


class CollectionQueriesView(StaffView):
    """The collection's queries (split, qrels, relevant, studied, pooled, search, sort), paged."""

    @extend_schema(
        operation_id="collections_data_queries_list", parameters=TABLE_PARAMETERS, responses={200: OpenApiTypes.OBJECT}
    )
    def get(self, request, collection_id):
        collection = get_object_or_404(Collection, pk=collection_id)
        return table_response(collection_query_table(collection, request.query_params))


class CollectionQueryView(StaffView):
    """One query: text and context, metadata, qrels, study items on it, every finished run's result."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, collection_id, query_id):
        collection = get_object_or_404(Collection, pk=collection_id)
        query = get_object_or_404(Query, pk=query_id, collection=collection)
        return Response(collection_query_detail(collection, query))


class CollectionQueryJumpView(StaffView):
    """The collection's query at `?jump=N` (position from 1) or, with `jump_by=query`, of that id."""

    @extend_schema(
        parameters=[OpenApiParameter("jump", str, required=True), OpenApiParameter("jump_by", str)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, collection_id):
        query = collection_query_jump(get_object_or_404(Collection, pk=collection_id), request.query_params)
        return Response({"query": query.pk, "external_id": query.external_id})


class CollectionQueriesExportView(ExportView):
    """The queries given (`items`: query ids) or all matching, in /api/queries/'s shape
    (`format=json|csv|jsonl`)."""

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=list(JUDGMENT_FORMATS)), *SELECTION_PARAMETERS],
        responses=EXPORT_RESPONSES,
    )
    def get(self, request, collection_id):
        collection = get_object_or_404(Collection, pk=collection_id)
        wanted, chunks = collection_query_export(collection, request.query_params, _selection(request))
        return download(chunks, f"collection-{collection.pk}-queries", wanted)
