"""Staff REST API for jobs: list and poll them (status, progress 0..1, message, shards), cancel
one, retry a failed or cancelled one."""

from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response

from jobs.errors import BrokerUnavailable
from jobs.selectors import jobs_for_listing, top_level_jobs
from jobs.serializers import JobSerializer
from jobs.services import request_cancel, retry_job


class JobViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = JobSerializer
    permission_classes = [IsAdminUser]

    def get_queryset(self):
        return top_level_jobs() if self.action == "list" else jobs_for_listing()

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

    @extend_schema(request=None, responses={202: JobSerializer, 409: JobSerializer, 503: None})
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        """Queue a failed or cancelled job again (a run: all its shards, its partial hits having
        been removed when it stopped). Anything else answers 409; an unreachable broker 503."""
        job = self.get_object()
        try:
            job = retry_job(job)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except BrokerUnavailable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
