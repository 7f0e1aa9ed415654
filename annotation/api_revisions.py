"""REST for an annotator's own answers, where the study allows revisions
(annotation.services.revisions): the list (`GET /api/annotate/STUDY/answers/?page=N`), one
answer with its item as shown (`GET .../answers/ITEM/`) and its revision (`POST` the answer's
parts as /submit/ takes them: 200 with `created` true when recorded, false when unchanged; 409
when the answer may no longer be revised; 403 where the study does not allow revisions or the
annotator may not work there; 404 for an item they did not judge)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.fields import AsciiIntegerField

from .api import ANSWER_KEYS
from .models import ItemCandidate, Study
from .serializers import SubmitSerializer
from .services import SubmissionRejected
from .services.revisions import ensure_revisions_open, my_answers, own_judgment, revise_judgment, revision_payload


class RevisionSerializer(SubmitSerializer):
    """A revised answer: the same parts as a submission; the URL names the item."""

    item = AsciiIntegerField(required=False)


class AnswersView(APIView):
    """The annotator's answers in the study, newest first, 50 a page: `item`, `preview` (the item
    as they read it, in one line), `answer` (in words), `answered_at`, `revision`, `revised_at`
    and `refusal` (why it may not be revised now, or null)."""

    permission_classes = [permissions.IsAuthenticated]

    @extend_schema(
        operation_id="annotate_answers_list",
        parameters=[OpenApiParameter("page", int)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        ensure_revisions_open(study, request.user)
        rows, page = my_answers(study, request.user, request.query_params.get("page", 1))
        return Response(
            {"count": page.paginator.count, "page": page.number, "pages": page.paginator.num_pages, "results": rows}
        )


class AnswerView(APIView):
    """One of the annotator's answers with its item as shown; POST revises it."""

    permission_classes = [permissions.IsAuthenticated]

    def _judgment(self, request, study_id, item_id):
        study = get_object_or_404(Study, pk=study_id)
        ensure_revisions_open(study, request.user)
        judgment = own_judgment(study, request.user, item_id)
        if judgment is None:
            raise NotFound("you have no answer to this item")
        return study, judgment

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, study_id, item_id):
        study, judgment = self._judgment(request, study_id, item_id)
        return Response(revision_payload(study, judgment))

    @extend_schema(request=RevisionSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request, study_id, item_id):
        study, judgment = self._judgment(request, study_id, item_id)
        form = RevisionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        answer = {key: data[key] for key in ANSWER_KEYS if key in data}
        if "candidate" in data:
            candidate = ItemCandidate.objects.filter(item_id=judgment.item_id, pk=data["candidate"]).first()
            if candidate is None:
                raise ValidationError({"candidate": ["not one of this item's candidates"]})
            answer["candidate"] = candidate
        try:
            revision = revise_judgment(judgment, request.user, unsure=data["unsure"], **answer)
        except SubmissionRejected as exc:
            code = status.HTTP_409_CONFLICT if exc.conflict else status.HTTP_400_BAD_REQUEST
            return Response({"detail": str(exc)}, status=code)
        return Response({**revision_payload(study, revision.judgment), "created": revision.created})
