"""Django admin for the annotation app. Studies and annotator profiles are editable (blocking an
annotator is done here); items, assignments and judgments are read-only records, since the
rules that write them (seeded shuffles, slots, immutability, voiding with a reason) live in
annotation.services."""

from django.contrib import admin

from .models import AnnotatorProfile, Assignment, Item, ItemCandidate, Judgment, Study, StudyGrant


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "collection", "status", "candidates_per_item", "judgments_per_item", "created_at"]
    list_filter = ["kind", "status"]
    search_fields = ["name"]
    filter_horizontal = ["annotators"]
    readonly_fields = [
        "kind",
        "collection",
        "negatives_run",
        "seed",
        "candidates_per_item",
        "context_left",
        "context_right",
        "parameters",
        "created_by",
        "created_at",
    ]

    def has_add_permission(self, request):
        return False  # studies are drawn by create_proxy_study (staff form, API, create_study)


class ItemCandidateInline(admin.TabularInline):
    model = ItemCandidate
    fields = ["position", "passage", "is_gold", "source_run", "source_rank"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Item)
class ItemAdmin(ReadOnlyAdmin):
    list_display = ["id", "study", "position", "query"]
    list_filter = ["study"]
    list_select_related = ["study", "query"]
    inlines = [ItemCandidateInline]


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ["id", "item", "annotator", "slot", "state", "claimed_at", "expires_at", "submitted_at"]
    list_filter = ["state", "item__study"]
    list_select_related = ["item", "annotator"]


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyAdmin):
    list_display = ["id", "item", "annotator", "choice", "label", "seconds", "source", "submitted_at", "voided"]
    list_filter = ["voided", "source", "item__study"]
    search_fields = ["annotator__username"]
    list_select_related = ["item", "annotator", "choice"]


@admin.register(AnnotatorProfile)
class AnnotatorProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "expertise", "blocked", "only_granted"]
    list_filter = ["blocked", "only_granted"]
    search_fields = ["user__username", "expertise"]


@admin.register(StudyGrant)
class StudyGrantAdmin(admin.ModelAdmin):
    list_display = ["study", "annotator", "item_quota", "created_at"]
    list_filter = ["study"]
    search_fields = ["annotator__username"]
