"""Annotator and staff REST routes for studies (mounted under /api/ by annotation/urls.py)."""

from django.urls import include, path

from . import api

urlpatterns = [
    path("annotate/<int:study_id>/next/", api.NextItemView.as_view(), name="api-annotate-next"),
    path("annotate/<int:study_id>/submit/", api.SubmitView.as_view(), name="api-annotate-submit"),
    path("studies/", api.StudyListCreateView.as_view(), name="api-studies"),
    path("studies/<int:pk>/", api.StudyDetailView.as_view(), name="api-study"),
    path("studies/<int:pk>/train/", api.StudyTrainView.as_view(), name="api-study-train"),
    path("judgments/", api.JudgmentExportView.as_view(), name="api-judgments"),
    path("judgments/<int:pk>/void/", api.VoidJudgmentView.as_view(), name="api-judgment-void"),
    path("", include("annotation.api_quality")),
]
