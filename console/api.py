"""`/api/uploads/`: GET lists the upload kinds (what each accepts and needs); POST a multipart
form `{kind, file, name, title, author, split, collection, study}` → 202 with the queued job
(follow it at /api/jobs/ID/), or 400 with one line naming the field. Staff only."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiTypes, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.serializers import JobSerializer
from retrieval.errors import InputError

from .uploads import OPTION_LABELS, UPLOAD_KINDS, queue_upload

UploadRequest = inline_serializer(
    "UploadRequest",
    {
        "kind": serializers.ChoiceField(choices=list(UPLOAD_KINDS)),
        "file": serializers.FileField(),
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
