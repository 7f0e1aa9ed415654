"""Staff REST routes of the integrations app (mounted under /api/)."""

from django.urls import path

from . import api

urlpatterns = [
    path("auth/token/", api.TokenView.as_view(), name="api-token"),
    path("invitations/", api.InvitationsView.as_view(), name="api-invitations"),
    path("webhooks/", api.WebhooksView.as_view(), name="api-webhooks"),
    path("webhooks/<int:pk>/", api.WebhookDetailView.as_view(), name="api-webhook"),
    path("webhooks/<int:pk>/deliveries/", api.WebhookDeliveriesView.as_view(), name="api-webhook-deliveries"),
    path("studies/<int:pk>/recruiting/", api.RecruitingView.as_view(), name="api-study-recruiting"),
    path("studies/<int:pk>/crowd-link/", api.CrowdLinkView.as_view(), name="api-study-crowd-link"),
    path("studies/<int:pk>/participants/", api.ParticipantsView.as_view(), name="api-study-participants"),
    path(
        "studies/<int:pk>/participants/<str:participant>/screen-out/",
        api.ScreenOutView.as_view(),
        name="api-participant-screen-out",
    ),
]
