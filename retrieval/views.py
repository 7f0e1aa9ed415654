"""The staff dashboard: collections, recent runs with their key metrics, jobs with live progress,
and a form that starts a BM25 or dense run (validated by the same serializer as the API)."""
from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework.exceptions import ValidationError

from retrieval import selectors
from retrieval.access import staff_required
from retrieval.bm25 import DEFAULT_B, DEFAULT_K1
from retrieval.jobs import sweep_stale_jobs
from retrieval.models import Retriever
from retrieval.serializers import RunRequestSerializer
from retrieval.services.runs import DEFAULT_CONTEXT, DEFAULT_DEPTH

RECENT_RUNS = 10
RECENT_JOBS = 15
DEFAULT_RUN_REQUEST = {
    "retriever": Retriever.Kind.BM25, "k1": DEFAULT_K1, "b": DEFAULT_B, "context_left": DEFAULT_CONTEXT[0],
    "context_right": DEFAULT_CONTEXT[1], "depth": DEFAULT_DEPTH, "model": "",
}


def _dashboard_context(run_request: dict, errors: dict) -> dict:
    sweep_stale_jobs()
    runs = list(selectors.runs_for_listing()[:RECENT_RUNS])
    return {
        "collections": selectors.collections_with_counts(),
        "runs": [{"run": run, "metrics": selectors.key_metrics(selectors.run_metrics(run))} for run in runs],
        "metric_names": selectors.KEY_METRICS,
        "jobs": selectors.jobs_for_listing()[:RECENT_JOBS],
        "retriever_kinds": Retriever.Kind.choices,
        "run_request": run_request,
        "errors": errors,
    }


@staff_required
@require_http_methods(["GET", "POST"])
def dashboard(request):
    """GET: the overview. POST: start a run, then come back here (post/redirect/get); invalid
    input re-renders the form with the errors next to their fields."""
    if request.method == "POST":
        serializer = RunRequestSerializer(data=request.POST, context={"user": request.user})
        if serializer.is_valid():
            try:
                run = serializer.save()
            except ValidationError as exc:  # a rule of the run service (e.g. k1 out of range)
                errors = exc.detail
            else:
                messages.success(request, f"Run {run.pk} queued as job {run.job_id} on the {run.job.queue} queue.")
                return redirect("dashboard")
        else:
            errors = serializer.errors
        context = _dashboard_context({**DEFAULT_RUN_REQUEST, **request.POST.dict()}, errors)
        return render(request, "retrieval/dashboard.html", context, status=400)
    return render(request, "retrieval/dashboard.html", _dashboard_context(DEFAULT_RUN_REQUEST, {}))
