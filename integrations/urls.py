"""Integration pages; the REST routes live in integrations/api_urls.py under /api/."""

from django.urls import include, path

from . import views

urlpatterns = [
    path("api/", include("integrations.api_urls")),
    path("invitations/<str:token>/", views.invitation_accept, name="invitation_accept"),
    path("crowd/<str:slug>/", views.crowd_entry, name="crowd_entry"),
    path("crowd/<str:slug>/done/", views.crowd_done, name="crowd_done"),
    path("studies/<id:study_id>/recruiting/", views.study_recruiting, name="study_recruiting"),
    path("studies/<id:study_id>/recruiting/invite/", views.recruiting_invite, name="recruiting_invite"),
    path("studies/<id:study_id>/recruiting/annotators/", views.recruiting_annotators, name="recruiting_annotators"),
    path("studies/<id:study_id>/recruiting/grant/", views.recruiting_grant, name="recruiting_grant"),
    path("studies/<id:study_id>/recruiting/scope/", views.recruiting_scope, name="recruiting_scope"),
    path("studies/<id:study_id>/recruiting/crowd/", views.recruiting_crowd, name="recruiting_crowd"),
    path("studies/<id:study_id>/recruiting/screen-out/", views.recruiting_screen_out, name="recruiting_screen_out"),
]
