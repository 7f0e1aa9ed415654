"""REST endpoints for quality control (mounted under /api/ by one include in api_urls.py).

Staff: the study's quality overview, flags (list, refresh, resolve), blocks (list, block,
unblock), disagreements and adjudication, peer-review sampling, designating gold and
qualification items. Annotators: their qualification status, their next peer review and its
verdict. Thin views: each calls one service or selector of `annotation.services.quality` /
`qualification`; refusals (AnnotationForbidden 403, InputError 400) reach the client through
the project's exception handling without a catch here.
"""

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.fields import AsciiIntegerField
from retrieval.input_rules import parse_id

from .models import AnnotatorFlag, Item, ItemCandidate, PeerReview, Study, StudyBlock
from .services import annotator_refusal
from .services.adjudication import require_reason
from .services.qualification import qualification_state
from .services.quality import (
    DESIGNATABLE_ROLES,
    adjudicate,
    adjudication_payload,
    block_annotator,
    designate_items,
    disagreement_rows,
    disputed_items,
    next_peer_review,
    quality_overview,
    refresh_flags,
    resolve_flag,
    sample_for_peer_review,
    submit_peer_review,
    unblock_annotator,
)


def _annotator(username: str):
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ValidationError({"annotator": [f"no user named {username!r}"]})
    return user


# --- request shapes ----------------------------------------------------------------------------


class BlockSerializer(serializers.Serializer):
    annotator = serializers.CharField()
    reason = serializers.CharField()
    exclude_judgments = serializers.BooleanField(default=True)


class AdjudicationSerializer(serializers.Serializer):
    """The final answer: a candidate id or position (proxy), a label, or selected positions."""

    candidate = AsciiIntegerField(required=False)
    position = AsciiIntegerField(required=False, min_value=0)
    label = serializers.JSONField(required=False)
    selections = serializers.ListField(child=AsciiIntegerField(min_value=0), required=False)
    reason = serializers.CharField(allow_blank=True, default="", max_length=200)
    note = serializers.CharField(allow_blank=True, default="")

    def answer(self, item: Item) -> dict:
        """The validated answer as `quality.adjudicate` takes it: a candidate id must name one
        of the item's own candidates (400 on `candidate` otherwise)."""
        data = self.validated_data
        candidate = None
        if "candidate" in data:
            candidate = ItemCandidate.objects.filter(item=item, pk=data["candidate"]).first()
            if candidate is None:
                raise ValidationError({"candidate": ["not one of this item's candidates"]})
        return {
            "candidate": candidate,
            "position": data.get("position"),
            "label": data.get("label"),
            "selections": data.get("selections"),
        }


class SampleSerializer(serializers.Serializer):
    seed = AsciiIntegerField(required=False)


class DesignateSerializer(serializers.Serializer):
    """Draw `count` items with known answers, or name the `items` (and their `expected`
    answers, item id -> label or positions, for label kinds)."""

    role = serializers.ChoiceField(choices=DESIGNATABLE_ROLES)
    count = AsciiIntegerField(required=False, min_value=1)
    items = serializers.ListField(child=AsciiIntegerField(), required=False)
    expected = serializers.DictField(child=serializers.JSONField(), required=False)
    seed = AsciiIntegerField(required=False)


class VerdictSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=PeerReview.Verdict.values)
    comment = serializers.CharField(allow_blank=True, default="")


def flag_payload(flag: AnnotatorFlag) -> dict:
    return {
        "id": flag.pk,
        "study": flag.study_id,
        "annotator": flag.annotator.get_username(),
        "reason": flag.reason,
        "value": flag.value,
        "threshold": flag.threshold,
        "details": flag.details,
        "created_at": flag.created_at.isoformat(),
        "resolved_at": flag.resolved_at.isoformat() if flag.resolved_at else None,
        "resolved_by": flag.resolved_by.get_username() if flag.resolved_by else None,
    }


def block_payload(block: StudyBlock) -> dict:
    return {
        "study": block.study_id,
        "annotator": block.annotator.get_username(),
        "reason": block.reason,
        "exclude_judgments": block.exclude_judgments,
        "created_by": block.created_by.get_username() if block.created_by else None,
        "created_at": block.created_at.isoformat(),
    }


def _flags(study: Study, include_resolved: bool) -> list[dict]:
    flags = AnnotatorFlag.objects.filter(study=study).select_related("annotator", "resolved_by")
    if not include_resolved:
        flags = flags.filter(resolved_at__isnull=True)
    return [flag_payload(flag) for flag in flags.order_by("annotator__username", "reason", "-created_at")]


# --- staff -------------------------------------------------------------------------------------


class QualityOverviewView(APIView):
    """Staff: per annotator counted judgments, gold accuracy, median seconds, peer pass rate,
    qualification, block and open flags; the study's settings and disagreement counts."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        return Response(quality_overview(get_object_or_404(Study, pk=study_id)))


class FlagListView(APIView):
    """Staff: the study's open flags (`?all=1`: resolved ones too). POST refreshes them first
    from the current judgments, gold answers and reviews, and answers with the counts and list."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(parameters=[OpenApiParameter("all", bool)], responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        return Response({"flags": _flags(study, request.query_params.get("all") in ("1", "true"))})

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        return Response({**refresh_flags(study), "flags": _flags(study, include_resolved=False)})


class FlagResolveView(APIView):
    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, pk):
        flag = get_object_or_404(AnnotatorFlag, pk=pk)
        return Response(flag_payload(resolve_flag(flag, by=request.user)))


class BlockListView(APIView):
    """Staff: who is blocked from the study; POST blocks an annotator (with a reason; their
    judgments are excluded from statistics unless exclude_judgments is false)."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        blocks = StudyBlock.objects.filter(study=study).select_related("annotator", "created_by")
        return Response({"blocks": [block_payload(block) for block in blocks.order_by("annotator__username")]})

    @extend_schema(request=BlockSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        form = BlockSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        block = block_annotator(
            study,
            _annotator(data["annotator"]),
            by=request.user,
            reason=data["reason"],
            exclude_judgments=data["exclude_judgments"],
        )
        return Response(block_payload(block), status=status.HTTP_201_CREATED)


class BlockDetailView(APIView):
    """Staff: DELETE unblocks the annotator (their judgments count again)."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(responses={204: None})
    def delete(self, request, study_id, username):
        study = get_object_or_404(Study, pk=study_id)
        if not unblock_annotator(study, _annotator(username)):
            return Response({"detail": f"{username} is not blocked from this study"}, status=status.HTTP_404_NOT_FOUND)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DisagreementListView(APIView):
    """Staff: items whose counted judgments disagree, with the answers' counts and any
    adjudication (the adjudication page's data), a page at a time like the API's other lists
    (`?page=N`; `count`, `next`, `previous`, `results`): a 100K-item study disputes tens of
    thousands of items."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(
        parameters=[OpenApiParameter("page", int, description="1-based page number")],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(disputed_items(study), request, self)
        return paginator.get_paginated_response(disagreement_rows(study, page))


class AdjudicateView(APIView):
    """Staff: the final answer for an item (deciding again replaces it), with an optional reason
    from the study's list (the adjudication workspace's API requires one where judgments
    disagree)."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=AdjudicationSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, pk):
        item = get_object_or_404(Item.objects.select_related("study"), pk=pk)
        form = AdjudicationSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        adjudication = adjudicate(
            item,
            by=request.user,
            reason=require_reason(item.study, form.validated_data["reason"], required=False),
            note=form.validated_data["note"],
            **form.answer(item),
        )
        return Response({"item": item.pk, **adjudication_payload(adjudication)})


class PeerReviewSampleView(APIView):
    """Staff: assign a peer_review_rate sample of each annotator's judgments to other annotators."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=SampleSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        form = SampleSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return Response(sample_for_peer_review(study, seed=form.validated_data.get("seed")))


class DesignateView(APIView):
    """Staff: turn unjudged work items with known answers into hidden gold or qualification items."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(request=DesignateSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        form = DesignateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        items = None
        if "items" in data:
            items = list(Item.objects.filter(study=study, pk__in=data["items"]).order_by("position"))
            missing = sorted(set(data["items"]) - {item.pk for item in items})
            if missing:
                raise ValidationError({"items": [f"no item {missing[0]} in this study"]})
        expected = {}
        for key, value in data.get("expected", {}).items():
            if (item_id := parse_id(str(key))) is None:
                raise ValidationError({"expected": [f"keys are item ids, got {key!r}"]})
            expected[item_id] = value
        chosen = designate_items(
            study, data["role"], count=data.get("count"), items=items, expected=expected, seed=data.get("seed")
        )
        return Response({"role": data["role"], "items": [item.pk for item in chosen]})


# --- annotators --------------------------------------------------------------------------------


class QualificationStatusView(APIView):
    """The caller's standing in the study's qualification round (attempt n of m, last result)."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        state = qualification_state(study, request.user)
        return Response({**state.payload(), "refusal": annotator_refusal(study, request.user)})


class NextPeerReviewView(APIView):
    """The caller's next peer review in the study: the item and the answer to judge (never who
    gave it, the gold, or other reviews), or `{"finished": true}`."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        return Response(next_peer_review(study, request.user))

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        return self.get(request, study_id)


class PeerReviewVerdictView(APIView):
    """The reviewer's verdict (pass or fail, with an optional comment) on a review assigned to
    them: 201 when stored, 200 when they had already given one (it stands)."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(request=VerdictSerializer, responses={200: OpenApiTypes.OBJECT, 201: OpenApiTypes.OBJECT})
    def post(self, request, pk):
        review = get_object_or_404(PeerReview.objects.select_related("judgment__item__study"), pk=pk)
        form = VerdictSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        submission = submit_peer_review(
            review,
            reviewer=request.user,
            verdict=form.validated_data["verdict"],
            comment=form.validated_data["comment"],
        )
        review = submission.review
        return Response(
            {
                "review": review.pk,
                "verdict": review.verdict,
                "comment": review.comment,
                "reviewed_at": review.reviewed_at.isoformat(),
                "created": submission.created,
            },
            status=status.HTTP_201_CREATED if submission.created else status.HTTP_200_OK,
        )


urlpatterns = [
    path("studies/<id:study_id>/quality/", QualityOverviewView.as_view(), name="api-study-quality"),
    path("studies/<id:study_id>/flags/", FlagListView.as_view(), name="api-study-flags"),
    path("flags/<id:pk>/resolve/", FlagResolveView.as_view(), name="api-flag-resolve"),
    path("studies/<id:study_id>/blocks/", BlockListView.as_view(), name="api-study-blocks"),
    path("studies/<id:study_id>/blocks/<str:username>/", BlockDetailView.as_view(), name="api-study-block"),
    path("studies/<id:study_id>/disagreements/", DisagreementListView.as_view(), name="api-study-disagreements"),
    path("items/<id:pk>/adjudicate/", AdjudicateView.as_view(), name="api-item-adjudicate"),
    path("studies/<id:study_id>/peer-reviews/sample/", PeerReviewSampleView.as_view(), name="api-peer-review-sample"),
    path("studies/<id:study_id>/designate/", DesignateView.as_view(), name="api-study-designate"),
    path("annotate/<id:study_id>/qualification/", QualificationStatusView.as_view(), name="api-qualification"),
    path("annotate/<id:study_id>/peer-review/next/", NextPeerReviewView.as_view(), name="api-peer-review-next"),
    path("peer-reviews/<id:pk>/", PeerReviewVerdictView.as_view(), name="api-peer-review-verdict"),
]
