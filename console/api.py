"""The API's front door and uploads.

`/api/`: the browsable root, a map of the API's collections of resources with links (signed-in
users; it holds no data, like the schema), beside the API documentation at /api/docs/ (Swagger
UI, served from drf-spectacular-sidecar's static files; not Redoc, whose page fetches web fonts).

`/api/uploads/`: GET lists the upload kinds (what each accepts and needs); POST a multipart
form `{kind, file, name, title, author, split, collection, study}` → 202 with the queued job
(follow it at /api/jobs/ID/), or 400 with one line naming the field. Staff only."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiTypes, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from jobs.serializers import JobSerializer
from retrieval.errors import InputError
from retrieval.serializers import UploadedFileField

from .uploads import OPTION_LABELS, UPLOAD_KINDS, queue_upload

UploadRequest = inline_serializer(
    "UploadRequest",
    {
        "kind": serializers.ChoiceField(choices=list(UPLOAD_KINDS)),
        "file": UploadedFileField(),
        **{name: serializers.CharField(required=False) for name in OPTION_LABELS},
    },
)


class UploadView(APIView):
    permission_classes = [IsAdminUser]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request):
        return Response(
            {
                "kinds": [
                    {
                        "kind": kind.name,
                        "label": kind.label,
                        "suffixes": list(kind.suffixes),
                        "options": list(kind.options),
                        "required": list(kind.required),
                        "help": kind.help,
                    }
                    for kind in UPLOAD_KINDS.values()
                ]
            }
        )

    @extend_schema(request={"multipart/form-data": UploadRequest}, responses={202: JobSerializer})
    def post(self, request):
        try:
            job = queue_upload(
                request.data.get("kind"), request.FILES.get("file"), request.data.dict(), user=request.user
            )
        except InputError as error:
            return Response({error.field or "file": [str(error)]}, status=status.HTTP_400_BAD_REQUEST)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


# What /api/ links to, by section: (name, URL name). Every route under /api/ that takes no id is
# here (tests/console/test_api_docs.py checks it, so a new resource cannot be left out); routes
# with an id are reached from these. Staff-only resources say so; annotators reach their own
# work through /api/annotate/STUDY_ID/next/ and submit/.
API_MAP = {
    "documentation": [("schema", "api-schema"), ("swagger-ui", "api-docs")],
    "authentication": [("token", "api-token")],
    "retrieval (staff)": [
        ("collections", "collection-list"),
        ("queries", "query-list"),
        ("runs", "run-list"),
        ("run-import", "run-import-file"),
        ("retrievers", "retriever-list"),
        ("retriever-training", "retriever-train"),
        ("uploads", "api-uploads"),
    ],
    "jobs (staff)": [("jobs", "job-list")],
    "annotation (staff)": [
        ("studies", "api-studies"),
        ("judgments", "api-judgments"),
        ("adjudication-reasons", "api-adjudication-global-reasons"),
    ],
    "evaluation (staff)": [("comparisons", "evaluation:api-run-comparison")],
    "judges (staff)": [("judges", "judges:api-judges"), ("judge-secrets", "judges:api-judge-secrets")],
    "recruiting and webhooks (staff)": [("invitations", "api-invitations"), ("webhooks", "api-webhooks")],
}


class ApiRootView(APIView):
    """The Marginalia API. Every staff page has a twin here; see /api/docs/ for every endpoint,
    its parameters and its answers."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, format=None):
        return Response(
            {
                section: {name: reverse(url_name, request=request, format=format) for name, url_name in links}
                for section, links in API_MAP.items()
            }
        )
