"""Staff pages for evaluation. Thin: the report comes from evaluation.reports (which names the
modules that compute, so that the URLconf, loaded by every process, loads no statistics), the
tables from evaluation.formatting and the chart from evaluation.charts."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.http import require_POST

from annotation.models import Study
from evaluation import alerts, charts, crowd_tables, formatting, preference_access, preference_formatting
from evaluation.reports import compare_runs, requested_run_ids, resolve_model_runs, study_report_or_job
from retrieval.access import staff_required
from retrieval.errors import InputError
from retrieval.models import Run


@method_decorator(staff_required, name="dispatch")
class StudyReportPage(View):
    """The report of the study's kind: proxy studies and label studies have their own template."""

    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        proxy = study.kind == Study.Kind.PROXY
        template = REPORT_TEMPLATES.get(study.kind, "evaluation/label_report.html")
        selected = requested_run_ids(request.GET.getlist("model_run"))
        context = {
            "study": study,
            "runs": Run.objects.filter(collection=study.collection).select_related("retriever").order_by("pk"),
            "selected_runs": selected,
        }
        try:
            report, job = study_report_or_job(study, resolve_model_runs(study, selected), request.user)
        except InputError as exc:
            report, job, context["error"] = None, None, str(exc)
        # Read after the report: computing one checks the thresholds.
        context["watch"] = alerts.watch_payload(alerts.watch_of(study))
        if "error" in context:
            return render(request, template, context, status=400)
        if job is not None:
            return render(request, template, {**context, "computing": job})
        context["report"] = report
        if study.kind == Study.Kind.PREFERENCE:
            context.update(preference_context(report))
        else:
            context.update(proxy_context(report) if proxy else label_context(report))
            context.update(
                competence=crowd_tables.competence_rows(report), agreement_detail=crowd_tables.agreement_tables(report)
            )
        return render(request, template, context)


@method_decorator(staff_required, name="dispatch")
class AgreementWatchForm(View):
    """The report page's form for the study's agreement thresholds and batch size: saved, then
    back to the report (a refusal comes back as one line at the top of the page)."""

    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        target = reverse("evaluation:study-report", args=[study.pk])
        fields = {name: request.POST.get(name, "") for name in ("study_threshold", "annotator_threshold", "batch_size")}
        try:
            alerts.set_watch(study, **fields)
        except InputError as exc:
            messages.error(request, f"Not saved: {exc}")
        return redirect(f"{target}#agreement-watch")


REPORT_TEMPLATES = {
    Study.Kind.PROXY: "evaluation/study_report.html",
    Study.Kind.PREFERENCE: "evaluation/preference_report.html",
}


def preference_context(report: dict) -> dict:
    return {
        "summary": preference_formatting.preference_summary_line(report),
        "agreement_rows": preference_formatting.agreement_rows(report),
        "intransitivity_rows": preference_formatting.intransitivity_rows(report),
        "model_rows": preference_formatting.model_rows(report),
        "judge_rows": preference_formatting.judge_rows(report),
        "system_rows": preference_formatting.system_rows(report),
        "query_tables": preference_formatting.query_tables(report),
    }


@method_decorator(staff_required, name="dispatch")
class PreferenceScoresPage(View):
    """A preference study's scores per query with their intervals (`?model=&alpha=&intervals=`),
    runs compared with the human ranking (`&runs=1,2&p=0.95&depth=10`: compatibility and
    Kendall's tau), and the form that stores the human ranking as a run."""

    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        params = request.GET
        context = {
            "study": study,
            "runs": Run.objects.filter(collection=study.collection, status=Run.Status.DONE)
            .select_related("retriever")
            .order_by("pk"),
            "params": {key: params.get(key, "") for key in ("model", "alpha", "intervals", "runs", "p", "depth")},
        }
        try:
            options = preference_access.options_from(params)
            report = preference_access.scores(study, **options)
            compared = None
            run_ids = preference_access.requested_ids(",".join(params.getlist("runs")))
            if run_ids:
                options.pop("resamples", None)
                options.pop("seed", None)
                compared = preference_access.compare(
                    study,
                    run_ids,
                    **preference_access.comparison_from(params),
                    **options,
                )
        except InputError as exc:
            return render(request, "evaluation/preference_scores.html", {**context, "error": str(exc)}, status=400)
        context.update(
            report=report,
            query_tables=preference_formatting.query_tables(report),
            system_rows=preference_formatting.system_rows(report),
            compared=compared,
            model_rows=preference_formatting.model_rows({"models": compared["runs"]}) if compared else [],
        )
        return render(request, "evaluation/preference_scores.html", context)


@staff_required
@require_POST
def preference_run(request, study_id):
    """Store the study's human ranking as a run, then show that run's page."""
    study = get_object_or_404(Study, pk=study_id)
    try:
        options = preference_access.options_from(request.POST)
        run = preference_access.human_run(study, request.POST.get("name", "").strip() or None, **options)
    except InputError as exc:
        messages.error(request, f"No run stored: {exc}.")
        return redirect("evaluation:preference-scores", study_id=study.pk)
    messages.success(request, f"The human ranking is run {run.pk}, “{run.name}”.")
    return redirect("run_page", run_id=run.pk)


def proxy_context(report: dict) -> dict:
    return {
        "summary": formatting.summary_line(report),
        "method": formatting.method_line(report),
        "agreement_rows": formatting.agreement_rows(report),
        "annotator_rows": formatting.annotator_rows(report),
        "model_rows": formatting.model_rows(report),
        "unanimous_non_gold": formatting.error_rows(report["error_analysis"]["unanimous_non_gold"], "chosen"),
        "model_failures": {
            run_id: formatting.error_rows(entries, "model_answer")
            for run_id, entries in report["error_analysis"]["humans_agree_model_fails"].items()
        },
        "chart": charts.bar_chart_svg(charts.accuracy_bars(report), "Accuracy with 95% intervals"),
        "judge_rows": formatting.proxy_judge_rows(report),
        "position_rows": formatting.position_rows(report),
        "position_line": formatting.position_line(report),
    }


def label_context(report: dict) -> dict:
    agreement_bars = charts.annotator_agreement_bars(report)
    return {
        "summary": formatting.label_summary_line(report),
        "quotable": formatting.quotable_line(report),
        "agreement_rows": formatting.label_agreement_rows(report),
        "annotator_rows": formatting.label_annotator_rows(report),
        "model_rows": formatting.label_model_rows(report),
        "aggregate_rows": formatting.aggregate_rows(report),
        "judge_rows": formatting.label_judge_rows(report),
        "judge_confusions": formatting.judge_confusions(report),
        "position_rows": formatting.position_rows(report),
        "position_line": formatting.position_line(report),
        "distribution_chart": charts.bar_chart_svg(charts.label_distribution_bars(report), "Share of labels given"),
        "agreement_chart": (
            charts.bar_chart_svg(agreement_bars, "Annotators' agreement with the majority label")
            if agreement_bars
            else None
        ),
    }


@method_decorator(staff_required, name="dispatch")
class RunComparisonPage(View):
    """compare_runs as a page: `?runs=1,2[,3]&metrics=nDCG@10 R@5[&metric=ndcg@10]`: the table of
    runs with standard errors, the paired tests, and plots of the chosen metric (each run with
    its 95 % interval; every pair's per-query differences)."""

    def get(self, request):
        runs_text = request.GET.get("runs", "")
        metrics_text = request.GET.get("metrics", "")
        context = {"runs_text": runs_text, "metrics_text": metrics_text}
        if not runs_text:
            return render(request, "evaluation/run_comparison.html", context)
        try:
            comparison = compare_runs([part for part in runs_text.split(",") if part.strip()], metrics_text)
        except InputError as exc:
            return render(request, "evaluation/run_comparison.html", {**context, "error": str(exc)}, status=400)
        metric = request.GET.get("metric") if request.GET.get("metric") in comparison["metrics"] else None
        metric = metric or comparison["metrics"][0]
        names = {run_id: block["name"] for run_id, block in comparison["runs"].items()}
        context.update(
            comparison=comparison,
            metric=metric,
            rows=[
                {
                    "run": run_id,
                    "name": block["name"],
                    "cells": [(block["metrics"][key], block["stderr"][key]) for key in comparison["metrics"]],
                }
                for run_id, block in comparison["runs"].items()
            ],
            tests=[{**test, "a_name": names[test["a"]], "b_name": names[test["b"]]} for test in comparison["tests"]],
            interval_chart=charts.run_intervals_svg(comparison, metric),
            difference_charts=[
                charts.differences_svg(
                    [
                        a - b
                        for a, b in zip(
                            comparison["per_query"][test["a"]][metric],
                            comparison["per_query"][test["b"]][metric],
                            strict=True,
                        )
                    ],
                    f"{metric}: {names[test['a']]} − {names[test['b']]}, per query",
                )
                for test in comparison["tests"]
                if test["metric"] == metric
            ],
        )
        return render(request, "evaluation/run_comparison.html", context)
