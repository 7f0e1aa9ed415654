"""REST endpoints for annotators (next item, submit) and staff (studies, judgments export, void).

Thin views: each translates HTTP into one service or selector call. Refusals need no catching:
AnnotationForbidden is a PermissionDenied (403) and InputError becomes a 400 in the project's
exception handler (retrieval.api); only SubmissionRejected (400 or 409) is mapped here.
"""

from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.plumbing import build_array_type, build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, permissions, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.serializers import JobSerializer
from retrieval.input_rules import parse_id

from .exports import CHUNKS, JUDGMENT_FORMATS, judgment_export
from .models import Item, Judgment, Study
from .selectors import item_flags, own_answer_fields, pool_pairs, pool_summary, study_overview
from .serializers import (
    ItemFlagSerializer,
    ItemReferenceSerializer,
    PoolExtensionSerializer,
    PresentationSerializer,
    StudyCreateSerializer,
    StudySerializer,
    StudyTrainingRequestSerializer,
    SubmitSerializer,
    VoidSerializer,
)
from .services import (
    SubmissionRejected,
    create_preference_study,
    create_proxy_study,
    create_quotability_study,
    create_relevance_study,
    next_work,
    submit_judgment,
    void_judgment,
)
from .services.annotator_actions import (
    candidate_context,
    flag_item,
    skip_item,
    undo_deadline,
    undo_last_submission,
    undo_seconds,
    undoable_submission,
)
from .services.pools import extend_pool
from .services.presentation import apply_presentation, create_with_presentation, presentation_settings
from .services.qualification import qualification_receipt

STUDY_CREATORS = {
    Study.Kind.PROXY: create_proxy_study,
    Study.Kind.RELEVANCE: create_relevance_study,
    Study.Kind.QUOTABILITY: create_quotability_study,
    Study.Kind.PREFERENCE: create_preference_study,
}
# What an annotator may send as (part of) an answer besides the candidate id.
ANSWER_KEYS = ("position", "label", "selections", "spans", "rubric", "rationale")


# --- annotators --------------------------------------------------------------------------------


class NextItemView(APIView):
    """The annotator's current item in the study (resumed), else a newly claimed one, else
    `{"finished": true}`. GET and POST do the same; POST is for clients that avoid side
    effects on GET."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        return Response(next_work(study, request.user))

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        return self.get(request, study_id)


class SubmitView(APIView):
    """Store the annotator's answer to an item they claimed. 201 when stored, 200 when they had
    already answered (the stored answer is returned, unchanged)."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=SubmitSerializer, responses={200: OpenApiTypes.OBJECT, 201: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        form = SubmitSerializer(data=request.data)
        if not form.is_valid():
            get_object_or_404(Study, pk=study_id)
            raise ValidationError(form.errors)
        data = form.validated_data
        item = _study_item(study_id, data["item"])
        answer = {key: data[key] for key in ANSWER_KEYS if key in data}
        try:
            submission = submit_judgment(
                annotator=request.user,
                item=item,
                candidate_id=data.get("candidate"),
                seconds=data.get("seconds"),
                unsure=data["unsure"],
                **answer,
            )
        except SubmissionRejected as exc:
            return _conflict(exc)
        created_status = status.HTTP_201_CREATED if submission.created else status.HTTP_200_OK
        if submission.qualification_answer is not None:
            receipt = qualification_receipt(submission.qualification_answer)
            return Response({**receipt, "created": submission.created}, status=created_status)
        judgment = submission.judgment
        return Response(
            {
                "item": item.pk,
                **own_answer_fields(judgment),
                "unsure": judgment.unsure,
                "submitted_at": judgment.submitted_at.isoformat(),
                "created": submission.created,
                "undo_until": undo_deadline(judgment).isoformat() if submission.created and undo_seconds() else None,
            },
            status=created_status,
        )


def _study_item(study_id: int, item_id: int) -> Item:
    """The study's item with its study (one statement); 404 without the study, 400 without the item."""
    item = Item.objects.filter(study_id=study_id, pk=item_id).select_related("study").first()
    if item is None:
        get_object_or_404(Study, pk=study_id)
        raise ValidationError({"item": [f"no item {item_id} in this study"]})
    return item


def _conflict(exc: SubmissionRejected) -> Response:
    code = status.HTTP_409_CONFLICT if exc.conflict else status.HTTP_400_BAD_REQUEST
    return Response({"detail": str(exc)}, status=code)


class SkipView(APIView):
    """Give the item the annotator holds back to the queue for others; it is never served to
    them again. 200 with `created` false when they had skipped it already; 409 when they do not
    hold it. Ask for the next item afterwards."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=ItemReferenceSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        form = ItemReferenceSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            skip = skip_item(_study_item(study.pk, form.validated_data["item"]), request.user)
        except SubmissionRejected as exc:
            return _conflict(exc)
        return Response({"item": skip.item.pk, "skipped": True, "created": skip.created})


class FlagView(APIView):
    """Report an item the annotator was given as broken, with a reason staff read. 201, or 200
    when they had flagged it before (the first reason stands). The item stays theirs to answer
    or skip."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=ItemFlagSerializer, responses={200: OpenApiTypes.OBJECT, 201: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        form = ItemFlagSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        item = _study_item(study.pk, form.validated_data["item"])
        try:
            flagging = flag_item(item, request.user, form.validated_data["reason"])
        except SubmissionRejected as exc:
            return _conflict(exc)
        return Response(
            {"item": item.pk, "reason": flagging.flag.reason, "created": flagging.created},
            status=status.HTTP_201_CREATED if flagging.created else status.HTTP_200_OK,
        )


class UndoView(APIView):
    """Take back the annotator's last answer in the study within the grace period
    (MARGINALIA_UNDO_SECONDS) while nobody else has seen it: the judgment is withdrawn and the
    item is theirs to answer again (`next` serves it). 409 with the reason otherwise. GET says
    whether an answer may be taken back now (`undo`: item, until, seconds_left, or null)."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        undoable = undoable_submission(study, request.user)
        return Response({"undo": undoable.payload() if undoable else None})

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        try:
            item = undo_last_submission(study, request.user)
        except SubmissionRejected as exc:
            return _conflict(exc)
        return Response({"item": item.pk, "undone": True})


class ContextView(APIView):
    """The sentences around a candidate (`?candidate=ID`, an id of the item the annotator holds)
    in its book: `before`, `sentences`, `after`. Only in studies that allow more context (403
    otherwise); 409 for a candidate of an item the annotator does not hold."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(parameters=[OpenApiParameter("candidate", int, required=True)], responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        candidate = request.query_params.get("candidate", "")
        if (candidate_id := parse_id(candidate)) is None:
            raise ValidationError({"candidate": ["give the candidate id: ?candidate=ID"]})
        try:
            return Response(candidate_context(study, request.user, candidate_id))
        except SubmissionRejected as exc:
            return _conflict(exc)


# --- staff -------------------------------------------------------------------------------------


class StudyListCreateView(generics.ListCreateAPIView):
    """Staff: every study with its counts; POST creates a study of any kind (same rules as
    `create_study`): the kind's own fields are listed in StudyCreateSerializer.KIND_FIELDS."""

    permission_classes = [permissions.IsAdminUser]
    queryset = Study.objects.select_related("collection", "created_by").prefetch_related("annotators")
    serializer_class = StudySerializer

    def get_serializer_class(self):
        return StudyCreateSerializer if self.request.method == "POST" else StudySerializer

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(
            [{**StudySerializer(study).data, "overview": study_overview(study)} for study in page]
        )

    @extend_schema(request=StudyCreateSerializer, responses={201: OpenApiTypes.OBJECT})
    def create(self, request, *args, **kwargs):
        form = StudyCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        kind, options = form.service_arguments()
        creation = create_with_presentation(
            STUDY_CREATORS[kind], presentation=form.presentation(), **options, created_by=request.user
        )
        body = {**creation.summary(), "study": StudySerializer(creation.study).data}
        return Response(body, status=status.HTTP_201_CREATED)


class StudyDetailView(generics.RetrieveAPIView):
    permission_classes = [permissions.IsAdminUser]
    queryset = StudyListCreateView.queryset
    serializer_class = StudySerializer

    def retrieve(self, request, *args, **kwargs):
        study = self.get_object()
        return Response({**StudySerializer(study).data, "overview": study_overview(study)})


POOL_PAIRS_PER_PAGE = 500


class StudyPoolView(APIView):
    """Staff: how a relevance study's pairs were pooled: the strategy, its settings and budget,
    each run's contribution, move-to-front's priorities and turn, and every pair, judged or not,
    with the runs' ranks, fusion score, place in the order and outcome (500 a page, `?page=N`)."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(parameters=[OpenApiParameter("page", int, required=False)], responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk):
        study = get_object_or_404(Study, pk=pk)
        summary = pool_summary(study)
        if summary is None:
            raise NotFound(f"study {study.pk} has no pool")
        pages = max(1, -(-summary["pairs"] // POOL_PAIRS_PER_PAGE))
        page = parse_id(request.query_params.get("page", "1"))
        if page is None or not 1 <= page <= pages:
            raise ValidationError({"page": [f"must be a page number between 1 and {pages}"]})
        start = (page - 1) * POOL_PAIRS_PER_PAGE
        pairs = pool_pairs(study, start, start + POOL_PAIRS_PER_PAGE)
        return Response({**summary, "page": page, "pages": pages, "pairs_page": pairs})


class StudyExtendView(APIView):
    """Staff: add runs to a relevance study's pool (as `extend_study`): only pairs not yet pooled
    are new, judgments stay; the strategy then draws what fits the budget."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=PoolExtensionSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, pk):
        study = get_object_or_404(Study.objects.select_related("collection"), pk=pk)
        form = PoolExtensionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        extension = extend_pool(study, **form.validated_data)
        return Response(extension.summary())


class StudyPresentationView(APIView):
    """Staff: how the annotation page presents the study: the candidate order (fixed once the
    study has judgments), the keys (only what differs from the defaults is stored and shown)
    and auto-advance. PATCH changes what it names; a clash is a 400 naming `keyboard.<key>`."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=None, responses={200: PresentationSerializer})
    def get(self, request, pk):
        return Response(presentation_settings(get_object_or_404(Study, pk=pk)))

    @extend_schema(request=PresentationSerializer, responses={200: PresentationSerializer})
    def patch(self, request, pk):
        study = get_object_or_404(Study, pk=pk)
        form = PresentationSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return Response(presentation_settings(apply_presentation(study, **form.validated_data)))


class StudyTrainView(APIView):
    """Staff: fine-tune a dense retriever on the study's judgments (gold or majority choice as
    positive, unchosen candidates as hard negatives), queued on the "gpu" queue; poll the job."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=StudyTrainingRequestSerializer, responses={202: JobSerializer})
    def post(self, request, pk):
        study = get_object_or_404(Study.objects.select_related("collection"), pk=pk)
        form = StudyTrainingRequestSerializer(data=request.data, context={"study": study, "user": request.user})
        form.is_valid(raise_exception=True)
        return Response(JobSerializer(form.save()).data, status=status.HTTP_202_ACCEPTED)


class StudyItemFlagsView(APIView):
    """Staff: the flags annotators raised on the study's items (who, which item, why, when)."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=None, responses={200: build_array_type(build_basic_type(OpenApiTypes.OBJECT))})
    def get(self, request, pk):
        return Response(item_flags(get_object_or_404(Study, pk=pk)))


class StreamedRenderer(BaseRenderer):
    """Selects a judgment export format by `?format=`; the view streams the body itself
    (annotation.exports), so a rendered Response never holds a whole study."""

    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return "".join(CHUNKS[self.format](data)).encode(self.charset)


class CSVRenderer(StreamedRenderer):
    media_type = "text/csv"
    format = "csv"


class JSONLinesRenderer(StreamedRenderer):
    media_type = "application/x-ndjson"
    format = "jsonl"


class JudgmentExportView(APIView):
    """Staff: one flat row per judgment of `?study=ID` (voided ones flagged), as
    `?format=json` (default), `csv` or `jsonl`. The renderers carry DRF's `format` override,
    so the query parameter selects them; errors are always JSON."""

    permission_classes = [permissions.IsAdminUser]
    renderer_classes = [JSONRenderer, CSVRenderer, JSONLinesRenderer]
    FORMATS = JUDGMENT_FORMATS

    def perform_content_negotiation(self, request, force=False):
        if request.method == "OPTIONS":  # the metadata is a JSON object whatever format is asked
            return JSONRenderer(), JSONRenderer.media_type
        wanted = request.query_params.get("format")
        if not force and wanted is not None and wanted not in self.FORMATS:
            raise ValidationError({"format": [f"must be one of {', '.join(self.FORMATS)}"]})
        return super().perform_content_negotiation(request, force)

    def handle_exception(self, exc):
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), "application/json"
        return super().handle_exception(exc)

    @extend_schema(
        parameters=[
            OpenApiParameter("study", int, required=True),
            OpenApiParameter("format", str, enum=list(FORMATS)),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        study_id = parse_id(request.query_params.get("study", ""))
        if study_id is None:
            raise ValidationError({"study": ["give the study id: ?study=ID"]})
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise NotFound(f"no study {study_id}")
        extension = request.accepted_renderer.format
        response = StreamingHttpResponse(
            judgment_export(study, extension), content_type=f"{request.accepted_renderer.media_type}; charset=utf-8"
        )
        if extension in ("csv", "jsonl"):
            response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-judgments.{extension}"'
        return response


class VoidJudgmentView(APIView):
    """Staff: exclude a judgment from statistics, with a reason. It stays in the export."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=VoidSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, pk):
        judgment = get_object_or_404(Judgment, pk=pk)
        form = VoidSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        judgment = void_judgment(judgment, by=request.user, reason=form.validated_data["reason"])
        return Response(
            {
                "judgment": judgment.pk,
                "voided": judgment.voided,
                "void_reason": judgment.void_reason,
                "voided_by": judgment.voided_by.get_username() if judgment.voided_by else None,
                "voided_at": judgment.voided_at.isoformat() if judgment.voided_at else None,
            }
        )
