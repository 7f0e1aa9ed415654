"""A collection's judge-agreement page: choose runs, the human qrels, one or more judges and
measures; see, per judge, whether it ranks the runs as the humans do (Kendall's tau, tau_AP,
Spearman's rho with bootstrap intervals, the largest rank change) and how its labels agree with
the humans' per query (Cohen's kappa). Thin: each judge's comparison comes from
evaluation.reports (by dotted path: it loads scipy), its rows from console.selectors."""

from __future__ import annotations

from django.shortcuts import get_object_or_404, render

from console.selectors import agreement_rows
from evaluation.aggregates import LEADERBOARD_METRICS
from evaluation.api import agreement_options
from evaluation.reports import judge_agreement
from retrieval.access import staff_required
from retrieval.errors import InputError
from retrieval.models import Collection, Run
from retrieval.qrels_sources import qrels_choices

JUDGE_PREFIX = "judge:"


@staff_required
def collection_judge_agreement(request, collection_id: int):
    collection = get_object_or_404(Collection, pk=collection_id)
    options = agreement_options(request.GET)
    choices = qrels_choices(collection)
    judges = [name for name in request.GET.getlist("judge") if name.strip()]
    context = {
        "collection": collection,
        "runs": Run.objects.filter(collection=collection, status=Run.Status.DONE).select_related("retriever"),
        "human_choices": [(value, label) for value, label in choices if not value.startswith(JUDGE_PREFIX)],
        "judge_choices": [value.removeprefix(JUDGE_PREFIX) for value, _ in choices if value.startswith(JUDGE_PREFIX)],
        "selected_runs": options["run_ids"],
        "selected_judges": judges,
        "options": options,
        "default_metrics": " ".join(LEADERBOARD_METRICS),
    }
    if not options["run_ids"] or not judges:
        return render(request, "console/judge_agreement.html", context)
    run_ids = options.pop("run_ids")
    try:
        reports = [judge_agreement(collection, run_ids, judge=judge, **options) for judge in judges]
    except InputError as error:
        return render(request, "console/judge_agreement.html", {**context, "error": str(error)}, status=400)
    context["comparisons"] = [agreement_rows(report) for report in reports]
    return render(request, "console/judge_agreement.html", context)
