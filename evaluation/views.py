"""Staff pages for evaluation. Thin: the report comes from evaluation.services, the tables from
evaluation.formatting and the chart from evaluation.charts."""
from django.contrib.auth.mixins import UserPassesTestMixin
from django.shortcuts import get_object_or_404, render
from django.views import View

from annotation.models import Study
from evaluation import charts, formatting
from evaluation.services import cached_study_report, proxy_study, requested_run_ids, resolve_model_runs
from retrieval.errors import InputError
from retrieval.models import Run


class StaffRequiredMixin(UserPassesTestMixin):
    """Staff only: anonymous visitors go to the login page, signed-in non-staff get 403."""

    def test_func(self):
        return self.request.user.is_active and self.request.user.is_staff


class StudyReportPage(StaffRequiredMixin, View):
    template_name = "evaluation/study_report.html"

    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        selected = requested_run_ids(request.GET.getlist("model_run"))
        context = {
            "study": study,
            "runs": Run.objects.filter(collection=study.collection).select_related("retriever").order_by("pk"),
            "selected_runs": selected,
        }
        try:
            report = cached_study_report(proxy_study(study.pk), resolve_model_runs(study, selected))
        except InputError as exc:
            return render(request, self.template_name, {**context, "error": str(exc)}, status=400)
        context.update(
            report=report,
            summary=formatting.summary_line(report),
            method=formatting.method_line(report),
            agreement_rows=formatting.agreement_rows(report),
            annotator_rows=formatting.annotator_rows(report),
            model_rows=formatting.model_rows(report),
            unanimous_non_gold=formatting.error_rows(report["error_analysis"]["unanimous_non_gold"], "chosen"),
            model_failures={
                run_id: formatting.error_rows(entries, "model_answer")
                for run_id, entries in report["error_analysis"]["humans_agree_model_fails"].items()
            },
            chart=charts.bar_chart_svg(charts.accuracy_bars(report), "Accuracy with 95% intervals"),
        )
        return render(request, self.template_name, context)
