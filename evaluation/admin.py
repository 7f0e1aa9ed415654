from django.contrib import admin

from evaluation.models import StudyReport


@admin.register(StudyReport)
class StudyReportAdmin(admin.ModelAdmin):
    """Cached reports, read-only: they are recomputed from the judgments, never edited."""

    list_display = ("study", "model_runs_key", "computed_at")
    list_filter = ("study",)
    readonly_fields = ("study", "model_runs_key", "fingerprint", "payload", "computed_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
