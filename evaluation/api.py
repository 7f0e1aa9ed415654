"""REST endpoint for study reports (staff only)."""
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Study
from evaluation.services import cached_study_report, proxy_study, requested_run_ids, resolve_model_runs
from retrieval.errors import InputError


class StudyReportAPI(APIView):
    permission_classes = [IsAdminUser]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "model_run", OpenApiTypes.INT, many=True,
                description="Run(s) on the study's collection to compare with the humans (repeat or comma-separate).",
            )
        ],
        responses=OpenApiTypes.OBJECT,
        description="Agreement, majority and annotator accuracy, model accuracy with McNemar tests, random baseline.",
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        try:
            runs = resolve_model_runs(study, requested_run_ids(request.query_params.getlist("model_run")))
            return Response(cached_study_report(proxy_study(study.pk), runs))
        except InputError as exc:
            raise ValidationError({exc.field or "detail": [str(exc)]}) from exc
