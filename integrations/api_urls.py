"""Staff REST routes of the integrations app (mounted under /api/)."""

from django.urls import path

from . import api

urlpatterns = [
    path("auth/token/", api.TokenView.as_view(), name="api-token"),
    path("invitations/", api.InvitationsView.as_view(), name="api-invitations"),
    path("webhooks/", api.WebhooksView.as_view(), name="api-webhooks"),
    path("webhooks/<id:pk>/", api.WebhookDetailView.as_view(), name="api-webhook"),
    path("webhooks/<id:pk>/deliveries/", api.WebhookDeliveriesView.as_view(), name="api-webhook-deliveries"),
    path("studies/<id:pk>/recruiting/", api.RecruitingView.as_view(), name="api-study-recruiting"),
    path("studies/<id:pk>/crowd-link/", api.CrowdLinkView.as_view(), name="api-study-crowd-link"),
    path("studies/<id:pk>/participants/", api.ParticipantsView.as_view(), name="api-study-participants"),
    path(
        "studies/<id:pk>/participants/<str:participant>/screen-out/",
        api.ScreenOutView.as_view(),
        name="api-participant-screen-out",
    ),
]
