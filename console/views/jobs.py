"""The job page (progress, message, shards, error, cancel, retry; the page polls the job's API
resource like the dashboard's bars) and its two buttons, which post here and come back
(post/redirect/get). Every link to a job on a page leads here, not to the JSON."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from console.job_pages import job_links
from jobs.errors import BrokerUnavailable
from jobs.models import Job
from jobs.selectors import jobs_for_listing
from jobs.services import ENDED, request_cancel, retry_job
from retrieval.access import staff_required


@staff_required
def job_detail(request, pk: int):
    job = get_object_or_404(jobs_for_listing(), pk=pk)
    return render(
        request,
        "console/job_detail.html",
        {
            "job": job,
            "shards": list(job.children.all()),
            "links": job_links(job),
            "can_retry": job.status in ENDED and job.parent_id is None,
        },
    )


def _back(request, job: Job):
    """To the page the button was on (a same-site `next`), else the job's page."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect("job-page", pk=job.pk)


@staff_required
@require_POST
def job_cancel(request, pk: int):
    job = get_object_or_404(Job, pk=pk)
    if job.is_finished:
        messages.info(request, f"Job {job.pk} had already ended ({job.status}); nothing to cancel.")
    else:
        request_cancel(job)
        job.refresh_from_db()
        stopping = "cancelled" if job.is_finished else "asked to stop: it stops at its next progress report"
        messages.success(request, f"Job {job.pk} {stopping}.")
    return _back(request, job)


@staff_required
@require_POST
def job_retry(request, pk: int):
    job = get_object_or_404(Job, pk=pk)
    try:
        retry_job(job)
    except (ValueError, BrokerUnavailable) as exc:
        messages.error(request, f"Job {job.pk} was not retried: {exc}")
    else:
        messages.success(request, f"Job {job.pk} queued again on the {job.queue} queue.")
    return _back(request, job)
