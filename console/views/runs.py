"""A run's page (parameters, metrics with standard errors overall and by quote length, the
recall@k curve, one row per query with the gold's rank, the TREC export) and its deletion."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.charts import recall_curve_svg
from console.selectors import run_page
from retrieval.access import staff_required
from retrieval.errors import InputError
from retrieval.models import Run
from retrieval.qrels_sources import qrels_choices
from retrieval.services.lifecycle import delete_run, deletion_refusals


def _run(run_id: int) -> Run:
    return get_object_or_404(Run.objects.select_related("retriever", "collection", "job"), pk=run_id)


@staff_required
def run_detail(request, run_id: int):
    """The run page; `?qrels=SOURCE&coverage_threshold=T` choose whose labels its coverage
    (Judged@k, the warning, the per-query column) is measured against."""
    run = _run(run_id)
    qrels, threshold = request.GET.get("qrels") or None, request.GET.get("coverage_threshold") or None
    context = {
        "run": run,
        "qrels_choices": qrels_choices(run.collection),
        "selected_qrels": qrels or "imported",
        "threshold_text": threshold or "",
        "deletion_refusals": deletion_refusals(run),
    }
    try:
        page = run_page(run, request.GET.get("page", 1), qrels, threshold)
    except InputError as error:
        page, context["coverage_error"] = run_page(run, request.GET.get("page", 1)), error.for_people()
    context.update(page, chart=recall_curve_svg(page["recall"], f"Recall@k of run {run.pk} (± 1 standard error)"))
    return render(request, "console/run_detail.html", context, status=400 if "coverage_error" in context else 200)


@staff_required
@require_POST
def run_delete(request, run_id: int):
    run = _run(run_id)
    if request.POST.get("confirm") != "yes":
        messages.error(request, f"Run {run.pk} was not deleted: tick the box to confirm.")
        return redirect("run_page", run_id=run.pk)
    try:
        delete_run(run)
    except InputError as error:
        messages.error(request, f"{error.message}.")
        return redirect("run_page", run_id=run_id)
    messages.success(request, f"Run {run_id} deleted with its hits.")
    return redirect("dashboard")
