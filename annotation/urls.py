"""Annotation pages; the REST routes live in annotation/api_urls.py under /api/."""
from django.urls import include, path

from . import views

urlpatterns = [
    path("api/", include("annotation.api_urls")),
    path("", views.home, name="home"),
    path("annotate/<int:study_id>/", views.annotate, name="annotate"),
    path("studies/", views.study_list, name="study_list"),
    path("studies/new/", views.study_create, name="study_create"),
    path("studies/<int:study_id>/", views.study_detail, name="study_detail"),
    path("studies/<int:study_id>/judgments/<int:judgment_id>/void/", views.judgment_void, name="judgment_void"),
]
