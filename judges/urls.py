"""Judge pages and API routes, full paths (included at "" by marginalia/urls.py)."""

from django.urls import path

from . import api, views

app_name = "judges"

urlpatterns = [
    path("judges/", views.judge_list, name="judge-list"),
    path("judges/<id:pk>/", views.judge_page, name="judge-page"),
    path("judges/secrets/", views.secret_add, name="judge-secret-add"),
    path("judges/secrets/<id:pk>/", views.secret_change, name="judge-secret-change"),
    path("judges/secrets/<id:pk>/delete/", views.secret_delete, name="judge-secret-delete"),
    path("studies/<id:study_id>/judges/run/", views.study_judge, name="study-judge"),
    path("api/judges/", api.JudgeListCreateView.as_view(), name="api-judges"),
    path("api/judge-secrets/", api.JudgeSecretsView.as_view(), name="api-judge-secrets"),
    path("api/judge-secrets/<id:pk>/", api.JudgeSecretDetailView.as_view(), name="api-judge-secret"),
    path("api/studies/<id:pk>/judge/", api.StudyJudgingView.as_view(), name="api-study-judge"),
    path("api/studies/<id:pk>/judge-answers/", api.StudyJudgeAnswersView.as_view(), name="api-study-judge-answers"),
]
