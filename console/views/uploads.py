"""The dashboard's upload form: the file is checked at once and its import queued as a job
that the dashboard's job table follows; a refusal comes back as one line above the form."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from console.job_pages import queued_message
from console.uploads import UPLOAD_KINDS, queue_upload
from console.views.dashboard import render_dashboard
from jobs.errors import BrokerUnavailable
from retrieval.access import staff_required
from retrieval.errors import InputError


@staff_required
@require_POST
def upload(request):
    try:
        job = queue_upload(request.POST.get("kind"), request.FILES.get("file"), request.POST.dict(), user=request.user)
    except InputError as error:
        return render_dashboard(request, upload_request=request.POST.dict(), upload_error=str(error), status=400)
    except BrokerUnavailable as error:
        return render_dashboard(request, upload_request=request.POST.dict(), upload_error=str(error), status=503)
    kind = UPLOAD_KINDS[job.parameters["upload"]]
    messages.success(request, queued_message(f"{kind.label} “{job.parameters['file']}” uploaded; its import", job))
    return redirect(reverse("dashboard") + "#jobs")
