"""Staff REST API for jobs: list and poll them (status, progress 0..1, message), cancel one."""

from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response

from jobs.selectors import jobs_for_listing
from jobs.serializers import JobSerializer
from jobs.services import request_cancel, sweep_stale_jobs


class JobViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = JobSerializer
    permission_classes = [IsAdminUser]

    def get_queryset(self):
        return jobs_for_listing()

    def list(self, request, *args, **kwargs):
        sweep_stale_jobs()
        return super().list(request, *args, **kwargs)

    @extend_schema(request=None, responses={202: JobSerializer, 409: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Ask the job to stop: a pending job is cancelled at once, a running one at its next
        progress report. A finished job answers 409 and stays as it is."""
        job = self.get_object()
        if job.is_finished:
            return Response(JobSerializer(job).data, status=status.HTTP_409_CONFLICT)
        request_cancel(job)
        job.refresh_from_db()
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
