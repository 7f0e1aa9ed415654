"""REST endpoints of the adjudication workspace (mounted under /api/ by api_urls.py), for staff
and accounts with the adjudicate permission (annotation.services.adjudication says where):

- GET `studies/ID/adjudication/queue/?page=N`: the queue in order, a page at a time, with its
  counts; PUT `{sample_rate}` (staff): the share of agreed items it samples.
- GET `studies/ID/adjudication/next/?after=ITEM`: the next undecided item's answers, or
  `{"finished": true}`.
- GET `studies/ID/adjudication/items/ITEM/`: one item's answers side by side.
- POST `studies/ID/adjudication/items/ITEM/decide/` `{position|candidate|label|selections,
  reason, note}`; POST `.../send-back/` `{reason, note}`.
- GET `studies/ID/adjudication/reasons/` (PUT `{reasons}`, staff: the study's own list, empty
  to use the global one); GET / PUT `adjudication/reasons/` (the global list).
Refusals: 403 with the reason (AdjudicationRefused), 400 naming the field (InputError), 404 for
anything that is not a work item of the study.
"""

from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.fields import AsciiFloatField
from retrieval.input_rules import parse_id

from .adjudication_selectors import item_answers, queue_page
from .api_quality import AdjudicationSerializer
from .models import Item, Study
from .services.adjudication import (
    decide,
    is_adjudicator,
    next_undecided,
    reasons,
    require_adjudicator,
    rework_payload,
    send_back,
    set_reasons,
    set_sample_rate,
    work_item,
)
from .services.quality import adjudication_payload


class IsAdjudicator(permissions.BasePermission):
    """Staff, or an account with the adjudicate permission (each view then checks the study)."""

    message = "adjudicators and staff only"

    def has_permission(self, request, view):
        return is_adjudicator(request.user)


def _study(request, study_id: int) -> Study:
    study = get_object_or_404(Study, pk=study_id)
    require_adjudicator(study, request.user)
    return study


def _item(study: Study, item_id: int) -> Item:
    try:
        return work_item(study, item_id)
    except Item.DoesNotExist as missing:
        raise Http404(str(missing)) from missing


def _is_staff(request) -> bool:
    return bool(request.user.is_staff)


class DecisionSerializer(AdjudicationSerializer):
    """The final answer (a candidate id or position for proxy items, a label, or selected
    positions), a reason from the study's list (required by `decide` where judgments disagree)
    and an optional note of at most 2,000 characters."""

    note = serializers.CharField(allow_blank=True, default="", max_length=2000)


class SendBackSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=200)
    note = serializers.CharField(allow_blank=True, default="", max_length=2000)


class QueueSampleSerializer(serializers.Serializer):
    sample_rate = AsciiFloatField(min_value=0, max_value=1)


class ReasonsSerializer(serializers.Serializer):
    reasons = serializers.ListField(child=serializers.CharField(allow_blank=True), allow_empty=True)


def _reasons_payload(study: Study | None) -> dict:
    listed = reasons(study)
    return {"study": study.pk if study else None, "reasons": listed.texts, "scope": listed.scope}


class QueueView(APIView):
    """The queue in order (lowest agreement first), `?page=N` (50 a page): `count`, `next`,
    `previous`, `results` (rank, item, number, agreement, judgments, sampled, reworked, status,
    decision; `query` for staff) and `queue` (entries, decided, undecided, disputed, sampled,
    sample_rate, seed, built_at). PUT `{sample_rate}` in [0, 1] (staff) rebuilds it."""

    permission_classes = [IsAdjudicator]

    @extend_schema(parameters=[OpenApiParameter("page", int)], responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = _study(request, study_id)
        rows, page, counts = queue_page(study, request.query_params.get("page", 1), staff=_is_staff(request))
        base = request.build_absolute_uri(request.path)
        return Response(
            {
                "count": page.paginator.count,
                "next": f"{base}?page={page.next_page_number()}" if page.has_next() else None,
                "previous": f"{base}?page={page.previous_page_number()}" if page.has_previous() else None,
                "queue": counts,
                "results": rows,
            }
        )

    @extend_schema(request=QueueSampleSerializer, responses={200: OpenApiTypes.OBJECT})
    def put(self, request, study_id):
        study = _study(request, study_id)
        if not _is_staff(request):
            return Response({"detail": "staff only"}, status=status.HTTP_403_FORBIDDEN)
        form = QueueSampleSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        queue = set_sample_rate(study, form.validated_data["sample_rate"])
        return Response({"sample_rate": queue.sample_rate, "seed": queue.seed, "sampled": queue.sampled})


class NextItemView(APIView):
    """The first undecided item of the queue after `?after=ITEM` (from the top without it),
    with its answers; `{"finished": true, "item": null}` when every entry is decided."""

    permission_classes = [IsAdjudicator]

    @extend_schema(parameters=[OpenApiParameter("after", int)], responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        study = _study(request, study_id)
        raw = request.query_params.get("after")
        after = None
        if raw is not None:
            after_id = parse_id(raw)
            if after_id is None:
                raise ValidationError({"after": ["an item id"]})
            after = Item.objects.filter(study=study, pk=after_id).first()
        following = next_undecided(study, after)
        if following is None:
            return Response({"finished": True, "item": None})
        return Response({"finished": False, **item_answers(_item(study, following), staff=_is_staff(request))})


class ItemAnswersView(APIView):
    """One work item: what annotators saw, every counted judgment under A, B, C (names for
    staff), agreement, decision, send-backs, the study's reasons and the item's queue place."""

    permission_classes = [IsAdjudicator]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id, item_id):
        study = _study(request, study_id)
        return Response(item_answers(_item(study, item_id), staff=_is_staff(request)))


class DecideView(APIView):
    """Decide the item (deciding again replaces the decision); answers the decision and the
    next undecided item's id (`next`, null when none is left)."""

    permission_classes = [IsAdjudicator]

    @extend_schema(request=DecisionSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id, item_id):
        study = _study(request, study_id)
        item = _item(study, item_id)
        form = DecisionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        adjudication = decide(
            item,
            by=request.user,
            reason=form.validated_data["reason"],
            note=form.validated_data["note"],
            **form.answer(item),
        )
        return Response({"item": item.pk, **adjudication_payload(adjudication), "next": next_undecided(study, item)})


class SendBackView(APIView):
    """Send the item back for a fresh round of judgments (its judgments voided and kept, its
    decision withdrawn), with a reason; 201 with the record and the next undecided item."""

    permission_classes = [IsAdjudicator]

    @extend_schema(request=SendBackSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, study_id, item_id):
        study = _study(request, study_id)
        item = _item(study, item_id)
        form = SendBackSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        rework = send_back(item, by=request.user, **form.validated_data)
        return Response(
            {"item": item.pk, **rework_payload(rework), "next": next_undecided(study, item)},
            status=status.HTTP_201_CREATED,
        )


class StudyReasonsView(APIView):
    """The reasons adjudicators choose from in the study (`scope`: study, global or default);
    PUT `{reasons: [...]}` (staff) sets the study's own list, `[]` to use the global one."""

    permission_classes = [IsAdjudicator]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id):
        return Response(_reasons_payload(_study(request, study_id)))

    @extend_schema(request=ReasonsSerializer, responses={200: OpenApiTypes.OBJECT})
    def put(self, request, study_id):
        study = _study(request, study_id)
        if not _is_staff(request):
            return Response({"detail": "staff only"}, status=status.HTTP_403_FORBIDDEN)
        form = ReasonsSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        set_reasons(study, form.validated_data["reasons"])
        return Response(_reasons_payload(study))


class GlobalReasonsView(APIView):
    """The global reasons list (studies without their own use it); PUT `{reasons}` (staff),
    `[]` to go back to the default list."""

    permission_classes = [IsAdjudicator]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        return Response(_reasons_payload(None))

    @extend_schema(request=ReasonsSerializer, responses={200: OpenApiTypes.OBJECT})
    def put(self, request):
        if not _is_staff(request):
            return Response({"detail": "staff only"}, status=status.HTTP_403_FORBIDDEN)
        form = ReasonsSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        set_reasons(None, form.validated_data["reasons"])
        return Response(_reasons_payload(None))


urlpatterns = [
    path("studies/<id:study_id>/adjudication/queue/", QueueView.as_view(), name="api-adjudication-queue"),
    path("studies/<id:study_id>/adjudication/next/", NextItemView.as_view(), name="api-adjudication-next"),
    path(
        "studies/<id:study_id>/adjudication/items/<id:item_id>/",
        ItemAnswersView.as_view(),
        name="api-adjudication-item",
    ),
    path(
        "studies/<id:study_id>/adjudication/items/<id:item_id>/decide/",
        DecideView.as_view(),
        name="api-adjudication-decide",
    ),
    path(
        "studies/<id:study_id>/adjudication/items/<id:item_id>/send-back/",
        SendBackView.as_view(),
        name="api-adjudication-send-back",
    ),
    path("studies/<id:study_id>/adjudication/reasons/", StudyReasonsView.as_view(), name="api-adjudication-reasons"),
    path("adjudication/reasons/", GlobalReasonsView.as_view(), name="api-adjudication-global-reasons"),
]
