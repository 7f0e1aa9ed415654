"""Reads of jobs for the API and the staff pages."""

from django.db.models import QuerySet

from jobs.models import Job


def jobs_for_listing() -> QuerySet[Job]:
    return Job.objects.select_related("created_by").order_by("-created_at", "-pk")
