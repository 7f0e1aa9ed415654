"""The staff form behind templates/judges/_study_judges.html: start judging a study, then follow
the job among the dashboard's jobs (post/redirect/get)."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from annotation.models import Study
from retrieval.access import staff_required
from retrieval.errors import InputError

from .services import get_judge, start_judging


@staff_required
@require_POST
def study_judge(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    try:
        samples = int(request.POST.get("samples") or 1)
        judge = get_judge(request.POST.get("judge") or None)
        job = start_judging(study, judge, samples, request.user)
    except ValueError:
        messages.error(request, "Samples must be a whole number.")
    except InputError as exc:
        messages.error(request, exc.for_people())
    else:
        messages.success(
            request, f"Judging of “{study.name}” by {judge} queued as job {job.pk} on the {job.queue} queue."
        )
    return redirect(request.POST.get("next") or f"/studies/{study.pk}/")
