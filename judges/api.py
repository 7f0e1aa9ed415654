"""Staff REST endpoints for judges: register and list judges, start judging a study, read a
study's judge results and answers, and the judge secrets (API keys, write-only). Annotators get
403 on every route (IsAdminUser); registering an endpoint judge and every judge-secret route
also need judges.manage_judge_endpoints."""

from django.shortcuts import get_object_or_404
from drf_spectacular.plumbing import build_array_type, build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, permissions, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Study

from .models import Judge, JudgeSecret
from .secrets import can_manage_endpoints, change_secret, delete_secret, store_secret
from .selectors import judge_answer_rows, judge_secret_row, study_judge_results
from .serializers import JudgeSecretChangeSerializer, JudgeSecretSerializer, JudgeSerializer, JudgingRequestSerializer
from .services import get_judge


class ManagesJudgeEndpoints(permissions.BasePermission):
    message = "This needs the permission judges.manage_judge_endpoints."

    def has_permission(self, request, view):
        return can_manage_endpoints(request.user)


class JudgeListCreateView(generics.ListCreateAPIView):
    """GET the registered judge versions; POST {name, backend, settings} registers one (a new
    version when the settings differ from the latest)."""

    permission_classes = [permissions.IsAdminUser]
    serializer_class = JudgeSerializer
    queryset = Judge.objects.all()

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "user": self.request.user}


# A JSON array of objects, for the schema.
ROWS = build_array_type(build_basic_type(OpenApiTypes.OBJECT))


class StudyJudgingView(APIView):
    """GET the study's judge results (one tally per judge version); POST {judge, samples} queues
    judging as a job (202): local models on "gpu", endpoints and runs on "long"."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(responses={200: ROWS})
    def get(self, request, pk):
        return Response(study_judge_results(get_object_or_404(Study, pk=pk)))

    @extend_schema(request=JudgingRequestSerializer, responses={202: OpenApiTypes.OBJECT})
    def post(self, request, pk):
        study = get_object_or_404(Study, pk=pk)
        serializer = JudgingRequestSerializer(data=request.data, context={"study": study, "user": request.user})
        serializer.is_valid(raise_exception=True)
        return Response(serializer.to_representation(serializer.save()), status=status.HTTP_202_ACCEPTED)


class StudyJudgeAnswersView(APIView):
    """GET ?judge=NAME: the study's judge answers (every judge without it), as export_judge_answers."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(
        parameters=[OpenApiParameter("judge", OpenApiTypes.STR, description="A judge's name; default: every judge.")],
        responses={200: ROWS},
    )
    def get(self, request, pk):
        study = get_object_or_404(Study, pk=pk)
        name = request.query_params.get("judge")
        return Response(judge_answer_rows(study, get_judge(name) if name else None))


class JudgeSecretsView(APIView):
    """GET the judge secrets (name, hint, who uses them: never a value); POST {name, value}
    registers one → 201, the value never echoed."""

    permission_classes = [permissions.IsAdminUser, ManagesJudgeEndpoints]

    @extend_schema(operation_id="judge_secrets_list", responses={200: ROWS})
    def get(self, request):
        return Response([judge_secret_row(secret) for secret in JudgeSecret.objects.all()])

    @extend_schema(request=JudgeSecretSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request):
        form = JudgeSecretSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        secret = store_secret(form.validated_data["name"], form.validated_data["value"], request.user)
        return Response(judge_secret_row(secret), status=status.HTTP_201_CREATED)


class JudgeSecretDetailView(APIView):
    """PUT {value} gives the secret a new value (a rotated key); DELETE removes it."""

    permission_classes = [permissions.IsAdminUser, ManagesJudgeEndpoints]

    @extend_schema(request=JudgeSecretChangeSerializer, responses={200: OpenApiTypes.OBJECT})
    def put(self, request, pk):
        secret = get_object_or_404(JudgeSecret, pk=pk)
        form = JudgeSecretChangeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return Response(judge_secret_row(change_secret(secret, form.validated_data["value"], request.user)))

    @extend_schema(responses={204: None})
    def delete(self, request, pk):
        delete_secret(get_object_or_404(JudgeSecret, pk=pk), request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
