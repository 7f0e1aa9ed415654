"""The dashboard's upload form: the file is checked at once and its import queued as a job
that the dashboard's job table follows; a refusal comes back as one sentence above the form, the
kind and options as they were sent, and a request to choose the file again (a browser never
refills a file input)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from console.job_pages import queued_message
from console.uploads import OPTION_LABELS, UPLOAD_KINDS, queue_upload
from console.views.dashboard import render_dashboard
from jobs.errors import BrokerUnavailable
from retrieval.access import staff_required
from retrieval.errors import InputError

# What the form calls its fields, for errors in words ("Book title is required ...").
FIELD_LABELS = {"kind": "Kind", "file": "File", **OPTION_LABELS}


@staff_required
@require_POST
def upload(request):
    uploaded = request.FILES.get("file")
    try:
        job = queue_upload(request.POST.get("kind"), uploaded, request.POST.dict(), user=request.user)
    except (InputError, BrokerUnavailable) as error:
        return render_dashboard(
            request,
            upload_request=request.POST.dict(),
            upload_error=error.for_people(FIELD_LABELS) if isinstance(error, InputError) else str(error),
            upload_file_name=uploaded.name if uploaded else "",
            status=400 if isinstance(error, InputError) else 503,
        )
    kind = UPLOAD_KINDS[job.parameters["upload"]]
    messages.success(request, queued_message(f"{kind.label} “{job.parameters['file']}” uploaded; its import", job))
    return redirect(reverse("dashboard") + "#jobs")
