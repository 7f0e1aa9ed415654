"""Staff REST API for retrieval: collections, queries, runs (start one; export it as a TREC run
file), retrievers (train one), jobs (poll progress; cancel) and qrels export. Staff only: queries
carry the context around the gold answer, and runs reveal which model proposed which candidate."""

from __future__ import annotations

import json

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAdminUser
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from jobs.errors import BrokerUnavailable
from jobs.serializers import JobSerializer
from retrieval import selectors
from retrieval.errors import InputError
from retrieval.input_rules import parse_id
from retrieval.metrics import evaluate_run
from retrieval.models import Query
from retrieval.serializers import (
    CollectionSerializer,
    QuerySerializer,
    RetrieverSerializer,
    RunDetailSerializer,
    RunImportSerializer,
    RunRequestSerializer,
    RunSerializer,
    TrainingRequestSerializer,
)


class PlainTextRenderer(BaseRenderer):
    """Lets clients that ask for text/plain (TREC runs and qrels) pass content negotiation: text
    as it is; anything else (an error's details) as JSON text."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, bytes):
            return data
        return (data if isinstance(data, str) else json.dumps(data)).encode(self.charset)


def text_download(lines, filename: str) -> StreamingHttpResponse:
    """Streamed, so a run with millions of hits never sits in memory as one string."""
    response = StreamingHttpResponse(lines, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    return response


TEXT_RESPONSE = {(200, "text/plain"): OpenApiTypes.STR}


class StaffOnly:
    permission_classes = [IsAdminUser]


class CollectionViewSet(StaffOnly, viewsets.ReadOnlyModelViewSet):
    serializer_class = CollectionSerializer

    def get_queryset(self):
        return selectors.collections_with_counts()

    @extend_schema(responses=TEXT_RESPONSE)
    @action(detail=True, methods=["get"], renderer_classes=[PlainTextRenderer])
    def qrels(self, request, pk=None):
        """The collection's ground truth as TREC qrels (`qid 0 docid relevance`)."""
        collection = self.get_object()
        return text_download(selectors.trec_qrels_lines(collection), f"{collection.name}.qrels")


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("collection", int, description="Only this collection's queries."),
        ]
    )
)
class QueryViewSet(StaffOnly, viewsets.ReadOnlyModelViewSet):
    serializer_class = QuerySerializer

    def get_queryset(self):
        queries = Query.objects.order_by("collection_id", "ordinal", "pk")
        collection = self.request.query_params.get("collection")
        if collection is not None:
            collection_id = parse_id(collection)
            if collection_id is None:
                return queries.none()
            queries = queries.filter(collection_id=collection_id)
        return queries


class RunViewSet(StaffOnly, viewsets.ReadOnlyModelViewSet):
    def get_queryset(self):
        return selectors.runs_for_listing()

    def get_serializer_class(self):
        return {
            "create": RunRequestSerializer,
            "retrieve": RunDetailSerializer,
            "import_file": RunImportSerializer,
        }.get(self.action, RunSerializer)

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "user": self.request.user}

    @extend_schema(request=RunRequestSerializer, responses={202: RunSerializer})
    def create(self, request, *args, **kwargs):
        """Start a run: it is queued on a worker (BM25 on "cpu", dense on "gpu"); poll its job."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = serializer.save()
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request={"multipart/form-data": RunImportSerializer}, responses={202: JobSerializer})
    @action(detail=False, methods=["post"], url_path="import", parser_classes=[MultiPartParser])
    def import_file(self, request):
        """Import a TREC run file (multipart: collection, name, file). The file is checked now
        (400 naming file, line and field); the import is queued on "cpu"; poll the job."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job = serializer.save()
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[
            OpenApiParameter("metrics", str, description='e.g. "R@20 nDCG@10 AP Bpref"; default: the usual set.'),
            OpenApiParameter("by", str, many=True, description="Break down by a query field."),
            OpenApiParameter(
                "qrels", str, description="imported (default), study:ID[:majority|mean|median] or judge:NAME."
            ),
            OpenApiParameter(
                "coverage_threshold", float, description="Warn below this mean Judged@k (default: the setting)."
            ),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["get"], url_path="per-query")
    def per_query(self, request, pk=None):
        """evaluate_run's report with every query's values (`per_query`: query id -> metric ->
        value; `judged_per_query`: query id -> cutoff -> Judged@k) under the chosen qrels; bad
        input -> 400 naming `metrics`, `qrels` or `coverage_threshold`."""
        run = self.get_object()
        return Response(
            evaluate_run(
                run,
                request.query_params.get("metrics", ""),
                per_query=True,
                by=request.query_params.getlist("by"),
                qrels=request.query_params.get("qrels"),
                threshold=request.query_params.get("coverage_threshold"),
            )
        )

    @extend_schema(responses=TEXT_RESPONSE)
    @action(detail=True, methods=["get"], renderer_classes=[PlainTextRenderer])
    def trec(self, request, pk=None):
        """The run as a TREC run file (`qid Q0 docid rank score tag`)."""
        run = self.get_object()
        return text_download((line + "\n" for line in selectors.trec_run_lines(run)), f"{run.tag}.trec")

    @extend_schema(responses=TEXT_RESPONSE)
    @action(detail=True, methods=["get"], renderer_classes=[PlainTextRenderer])
    def ranks(self, request, pk=None):
        """What evaluate_run reads beyond the TREC file, as `export_run --ranks` prints it: one
        JSON line per query (`query`, `candidates`, `stored_hits`, `ranks`: each relevant
        passage's exact rank over the whole candidate set)."""
        run = self.get_object()
        return text_download((line + "\n" for line in selectors.relevant_rank_lines(run)), f"{run.tag}.ranks.jsonl")


class RetrieverViewSet(StaffOnly, viewsets.ReadOnlyModelViewSet):
    """Registered retrievers (BM25 settings, dense models, trained models). A dense one is used
    in a run by its name or id as the run's `model`."""

    queryset = selectors.retrievers_for_listing()

    def get_serializer_class(self):
        return TrainingRequestSerializer if self.action == "train" else RetrieverSerializer

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "user": self.request.user}

    @extend_schema(request=TrainingRequestSerializer, responses={202: JobSerializer})
    @action(detail=False, methods=["post"])
    def train(self, request):
        """Fine-tune a dense retriever on a collection's "train" queries: it is queued on the "gpu"
        queue and registered under `name` when done; poll the returned job."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job = serializer.save()
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


def exception_handler(exc, context):
    """DRF's handler, plus the project's one input error: a service's InputError becomes a 400
    naming its field, so no view has to catch and translate it; an unreachable task queue is a
    503 saying so (nothing was queued or written)."""
    if isinstance(exc, BrokerUnavailable):
        return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, InputError):
        exc = ValidationError({exc.field or "non_field_errors": [exc.message]})
    return drf_exception_handler(exc, context)
