"""Evaluation pages and API routes, full paths (included at "" by marginalia/urls.py)."""

from django.urls import path

from evaluation.api import (
    AgreementWatchAPI,
    CollectionBundleAPI,
    LeaderboardAPI,
    PreferenceComparisonAPI,
    PreferenceQrelsAPI,
    PreferenceRunAPI,
    PreferenceScoresAPI,
    RunComparisonAPI,
    StudyAggregateAPI,
    StudyAgreementAPI,
    StudyQrelsAPI,
    StudyReportAPI,
    StudySoftLabelsAPI,
)
from evaluation.views import (
    AgreementWatchForm,
    PreferenceScoresPage,
    RunComparisonPage,
    StudyReportPage,
    preference_run,
)

app_name = "evaluation"

urlpatterns = [
    path("studies/<id:study_id>/report/", StudyReportPage.as_view(), name="study-report"),
    path("api/studies/<id:study_id>/report/", StudyReportAPI.as_view(), name="api-study-report"),
    path("api/studies/<id:study_id>/qrels/", StudyQrelsAPI.as_view(), name="api-study-qrels"),
    path("api/studies/<id:study_id>/aggregate/", StudyAggregateAPI.as_view(), name="api-study-aggregate"),
    path("api/studies/<id:study_id>/soft-labels/", StudySoftLabelsAPI.as_view(), name="api-study-soft-labels"),
    path("api/studies/<id:study_id>/agreement/", StudyAgreementAPI.as_view(), name="api-study-agreement"),
    path("api/studies/<id:study_id>/agreement-watch/", AgreementWatchAPI.as_view(), name="api-agreement-watch"),
    path("studies/<id:study_id>/agreement-watch/", AgreementWatchForm.as_view(), name="agreement-watch"),
    path("api/comparisons/", RunComparisonAPI.as_view(), name="api-run-comparison"),
    path("api/collections/<id:collection_id>/leaderboard/", LeaderboardAPI.as_view(), name="api-leaderboard"),
    path("api/collections/<id:collection_id>/bundle/", CollectionBundleAPI.as_view(), name="api-collection-bundle"),
    path("runs/compare/", RunComparisonPage.as_view(), name="run-comparison"),
    path("studies/<id:study_id>/preferences/", PreferenceScoresPage.as_view(), name="preference-scores"),
    path("studies/<id:study_id>/preferences/run/", preference_run, name="preference-run"),
    path("api/studies/<id:study_id>/preferences/", PreferenceScoresAPI.as_view(), name="api-preference-scores"),
    path("api/studies/<id:study_id>/preferences/qrels/", PreferenceQrelsAPI.as_view(), name="api-preference-qrels"),
    path(
        "api/studies/<id:study_id>/preferences/compare/",
        PreferenceComparisonAPI.as_view(),
        name="api-preference-compare",
    ),
    path("api/studies/<id:study_id>/preferences/run/", PreferenceRunAPI.as_view(), name="api-preference-run"),
]
