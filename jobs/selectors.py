"""Reads of jobs for the API and the staff pages."""

from django.db.models import Prefetch, QuerySet

from jobs.models import Job


def jobs_for_listing() -> QuerySet[Job]:
    """Every job, each with its shards (children) in order."""
    return (
        Job.objects.select_related("created_by")
        .prefetch_related(Prefetch("children", queryset=Job.objects.order_by("pk")))
        .order_by("-created_at", "-pk")
    )


def top_level_jobs() -> QuerySet[Job]:
    """Jobs that are not a part of another: what lists show (shards appear inside their job)."""
    return jobs_for_listing().filter(parent__isnull=True)
