"""A collection's leaderboard page: choose runs, a qrels source, measures and a leave-one-out
depth; see the runs ranked with standard errors, Judged@k beside every measure, significance
marks, the paired tests and leave-one-run-out; download the table as CSV or LaTeX. Thin: the
board comes from evaluation.reports (by dotted path: it loads scipy), its rows from
console.selectors, the files from the API's exports."""

from __future__ import annotations

from urllib.parse import urlencode

from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from console.selectors import leaderboard_rows
from evaluation.aggregates import LEADERBOARD_METRICS
from evaluation.api import leaderboard_download, leaderboard_options
from evaluation.reports import leaderboard
from retrieval.access import staff_required
from retrieval.errors import InputError
from retrieval.models import Collection, Run
from retrieval.qrels_sources import qrels_choices


@staff_required
def collection_leaderboard(request, collection_id: int):
    collection = get_object_or_404(Collection, pk=collection_id)
    options = leaderboard_options(request.GET)
    context = {
        "collection": collection,
        "runs": Run.objects.filter(collection=collection, status=Run.Status.DONE).select_related("retriever"),
        "qrels_choices": qrels_choices(collection),
        "selected_runs": options["run_ids"],
        "options": options,
        "default_metrics": " ".join(LEADERBOARD_METRICS),
    }
    if not options["run_ids"]:
        return render(request, "console/leaderboard.html", context)
    try:
        board = leaderboard(collection, **options)
    except InputError as error:
        return render(request, "console/leaderboard.html", {**context, "error": error.for_people()}, status=400)
    export = request.GET.get("export")
    if export in ("csv", "latex"):
        return leaderboard_download(collection, board, export)
    query = [(key, value) for key, values in request.GET.lists() if key != "export" for value in values]
    context.update(
        board=board,
        **leaderboard_rows(board),
        downloads={
            kind: reverse("collection_leaderboard", args=[collection.pk]) + "?" + urlencode([*query, ("export", kind)])
            for kind in ("csv", "latex")
        },
    )
    return render(request, "console/leaderboard.html", context)
