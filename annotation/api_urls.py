"""Annotator and staff REST routes for studies (mounted under /api/ by annotation/urls.py)."""

from django.urls import include, path

from . import api, api_revisions

urlpatterns = [
    path("annotate/<id:study_id>/next/", api.NextItemView.as_view(), name="api-annotate-next"),
    path("annotate/<id:study_id>/submit/", api.SubmitView.as_view(), name="api-annotate-submit"),
    path("annotate/<id:study_id>/skip/", api.SkipView.as_view(), name="api-annotate-skip"),
    path("annotate/<id:study_id>/flag/", api.FlagView.as_view(), name="api-annotate-flag"),
    path("annotate/<id:study_id>/undo/", api.UndoView.as_view(), name="api-annotate-undo"),
    path("annotate/<id:study_id>/context/", api.ContextView.as_view(), name="api-annotate-context"),
    path("annotate/<id:study_id>/answers/", api_revisions.AnswersView.as_view(), name="api-annotate-answers"),
    path(
        "annotate/<id:study_id>/answers/<id:item_id>/",
        api_revisions.AnswerView.as_view(),
        name="api-annotate-answer",
    ),
    path("studies/", api.StudyListCreateView.as_view(), name="api-studies"),
    path("studies/<id:pk>/", api.StudyDetailView.as_view(), name="api-study"),
    path("studies/<id:pk>/presentation/", api.StudyPresentationView.as_view(), name="api-study-presentation"),
    path("studies/<id:pk>/train/", api.StudyTrainView.as_view(), name="api-study-train"),
    path("studies/<id:pk>/pool/", api.StudyPoolView.as_view(), name="api-study-pool"),
    path("studies/<id:pk>/extend/", api.StudyExtendView.as_view(), name="api-study-extend"),
    path("studies/<id:pk>/item-flags/", api.StudyItemFlagsView.as_view(), name="api-study-item-flags"),
    path("judgments/", api.JudgmentExportView.as_view(), name="api-judgments"),
    path("judgments/<id:pk>/void/", api.VoidJudgmentView.as_view(), name="api-judgment-void"),
    path("", include("annotation.api_quality")),
    path("", include("annotation.api_adjudication")),
]
