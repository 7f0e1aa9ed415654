"""Django admin for integrations: records to look at. Invitations and crowd links are made
through the recruiting page, API or commands (tokens are shown only there, once)."""

from django.contrib import admin

from .models import CrowdLink, Invitation, Participant


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["email", "only_invited_studies", "created_at", "expires_at", "accepted_by"]
    readonly_fields = ["token_digest", "accepted_at", "accepted_by", "emailed_at"]


@admin.register(CrowdLink)
class CrowdLinkAdmin(admin.ModelAdmin):
    list_display = ["study", "completion_code", "quota", "active", "created_at"]


@admin.register(Participant)
class ParticipantAdmin(admin.ModelAdmin):
    list_display = ["user", "external_id", "link", "status", "created_at", "completed_at"]
    list_filter = ["status"]
    search_fields = ["user__username", "external_id"]
    readonly_fields = ["user", "link", "external_id", "platform_study", "session_digest", "address_digest"]
