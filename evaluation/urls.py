"""Evaluation pages and API routes, full paths (included at "" by marginalia/urls.py)."""

from django.urls import path

from evaluation.api import (
    CollectionBundleAPI,
    JudgeAgreementAPI,
    JudgeCardsAPI,
    LeaderboardAPI,
    RunComparisonAPI,
    StudyQrelsAPI,
    StudyReportAPI,
)
from evaluation.views import RunComparisonPage, StudyReportPage

app_name = "evaluation"

urlpatterns = [
    path("studies/<id:study_id>/report/", StudyReportPage.as_view(), name="study-report"),
    path("api/studies/<id:study_id>/report/", StudyReportAPI.as_view(), name="api-study-report"),
    path("api/studies/<id:study_id>/qrels/", StudyQrelsAPI.as_view(), name="api-study-qrels"),
    path("api/comparisons/", RunComparisonAPI.as_view(), name="api-run-comparison"),
    path("api/collections/<id:collection_id>/leaderboard/", LeaderboardAPI.as_view(), name="api-leaderboard"),
    path(
        "api/collections/<id:collection_id>/judge-agreement/", JudgeAgreementAPI.as_view(), name="api-judge-agreement"
    ),
    path("api/judges/<id:pk>/cards/", JudgeCardsAPI.as_view(), name="api-judge-cards"),
    path("api/collections/<id:collection_id>/bundle/", CollectionBundleAPI.as_view(), name="api-collection-bundle"),
    path("runs/compare/", RunComparisonPage.as_view(), name="run-comparison"),
]
