"""The staff dashboard (moved here from retrieval/views.py; same URL and name): collections,
recent runs with their key metrics, jobs with live progress, registered retrievers, and the forms
that start a BM25 or dense run and train a dense retriever (each validated by the same serializer
as its API twin)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotation.models import Study
from console.job_pages import queued_message
from console.uploads import OPTION_LABELS, UPLOAD_KINDS, option_kind_classes
from jobs.selectors import top_level_jobs
from retrieval import selectors
from retrieval.access import staff_required
from retrieval.bm25 import DEFAULT_B, DEFAULT_K1
from retrieval.metrics import run_metrics
from retrieval.models import Retriever
from retrieval.serializers import RunRequestSerializer, TrainingRequestSerializer, request_defaults, save_or_errors
from retrieval.services.runs import DEFAULT_CONTEXT, DEFAULT_DEPTH

RECENT_RUNS = 10
RECENT_JOBS = 15
DEFAULT_RUN_REQUEST = {
    "retriever": Retriever.Kind.BM25,
    "k1": DEFAULT_K1,
    "b": DEFAULT_B,
    "context_left": DEFAULT_CONTEXT[0],
    "context_right": DEFAULT_CONTEXT[1],
    "depth": DEFAULT_DEPTH,
    "model": "",
}
DEFAULT_TRAINING_REQUEST = request_defaults(TrainingRequestSerializer)
# What "Start a run" offers: the kinds the run form can start (an imported run is uploaded, not run).
STARTABLE_RETRIEVERS = [
    (kind, label)
    for kind, label in Retriever.Kind.choices
    if kind in RunRequestSerializer().fields["retriever"].choices
]


def render_dashboard(
    request,
    *,
    run_request: dict | None = None,
    errors: dict | None = None,
    training_request: dict | None = None,
    training_errors: dict | None = None,
    upload_request: dict | None = None,
    upload_error: str = "",
    upload_file_name: str = "",
    status: int = 200,
):
    """The dashboard, with each form showing what was sent and its errors, else its defaults."""
    runs = list(selectors.runs_for_listing()[:RECENT_RUNS])
    return render(
        request,
        "console/dashboard.html",
        {
            "collections": selectors.collections_with_counts(),
            "runs": [{"run": run, "metrics": selectors.key_metrics(run_metrics(run))} for run in runs],
            "metric_names": selectors.KEY_METRICS,
            "jobs": top_level_jobs()[:RECENT_JOBS],
            "retrievers": selectors.retrievers_for_listing(),
            "continuable_retrievers": selectors.continuable_retrievers(),
            "default_model": selectors.default_dense_model_label(),
            "retriever_kinds": STARTABLE_RETRIEVERS,
            "run_request": run_request or DEFAULT_RUN_REQUEST,
            "errors": errors or {},
            "training_request": training_request or DEFAULT_TRAINING_REQUEST,
            "training_errors": training_errors or {},
            "upload_kinds": UPLOAD_KINDS.values(),
            "upload_option_labels": OPTION_LABELS,
            "upload_option_kinds": option_kind_classes(),
            "upload_file_name": upload_file_name,
            "upload_request": upload_request or {},
            "upload_error": upload_error,
            "upload_limit": settings.MARGINALIA_UPLOAD_MAX_BYTES,
            "studies": Study.objects.order_by("-created_at"),
        },
        status=status,
    )


@staff_required
@require_http_methods(["GET", "POST"])
def dashboard(request):
    """GET: the overview. POST: start a run, then come back here (post/redirect/get); invalid
    input re-renders the form with the errors next to their fields."""
    if request.method == "GET":
        return render_dashboard(request)
    run, errors = save_or_errors(RunRequestSerializer(data=request.POST, context={"user": request.user}))
    if run is None:
        return render_dashboard(
            request, run_request={**DEFAULT_RUN_REQUEST, **request.POST.dict()}, errors=errors, status=400
        )
    messages.success(request, queued_message(f"Run {run.pk}", run.job))
    for warning in run.parameters.get("warnings", []):
        messages.warning(request, f"Run {run.pk}: {warning}.")
    return redirect("dashboard")


@staff_required
@require_POST
def start_training(request):
    """Queue a training, then show it among the jobs (post/redirect/get); invalid input
    re-renders the dashboard with the errors next to the training form's fields."""
    job, errors = save_or_errors(TrainingRequestSerializer(data=request.POST, context={"user": request.user}))
    if job is None:
        return render_dashboard(
            request,
            training_request={**DEFAULT_TRAINING_REQUEST, **request.POST.dict()},
            training_errors=errors,
            status=400,
        )
    messages.success(
        request,
        queued_message(f"Training of “{job.parameters['name']}”", job, "the retriever is registered when it finishes."),
    )
    return redirect(reverse("dashboard") + "#jobs")
