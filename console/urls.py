"""The staff pages: dashboard, jobs, collections, runs, studies and uploads; the API root and its
documentation (Swagger UI) (the annotation app keeps study
creation, quality and adjudication; evaluation keeps the reports)."""

from django.urls import path
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated

from console import api
from console.views import collections, dashboard, jobs, leaderboards, runs, studies, uploads

urlpatterns = [
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("dashboard/train/", dashboard.start_training, name="dashboard-train"),
    path("dashboard/upload/", uploads.upload, name="dashboard-upload"),
    path("api/", api.ApiRootView.as_view(), name="api-root"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="api-schema", permission_classes=[IsAuthenticated]),
        name="api-docs",
    ),
    path("api/uploads/", api.UploadView.as_view(), name="api-uploads"),
    path("collections/<id:collection_id>/", collections.collection_detail, name="collection_page"),
    path("collections/<id:collection_id>/rename/", collections.collection_rename, name="collection_rename"),
    path("collections/<id:collection_id>/delete/", collections.collection_delete, name="collection_delete"),
    path(
        "collections/<id:collection_id>/leaderboard/",
        leaderboards.collection_leaderboard,
        name="collection_leaderboard",
    ),
    path("jobs/<id:pk>/", jobs.job_detail, name="job-page"),
    path("jobs/<id:pk>/cancel/", jobs.job_cancel, name="job-page-cancel"),
    path("jobs/<id:pk>/retry/", jobs.job_retry, name="job-page-retry"),
    path("runs/<id:run_id>/", runs.run_detail, name="run_page"),
    path("runs/<id:run_id>/delete/", runs.run_delete, name="run_delete"),
    path("studies/", studies.study_list, name="study_list"),
    path("studies/<id:study_id>/", studies.study_detail, name="study_detail"),
    path("studies/<id:study_id>/train/", studies.study_train, name="study_train"),
    path("studies/<id:study_id>/pool/extend/", studies.study_extend, name="study_extend"),
    path("studies/<id:study_id>/close/", studies.study_close, name="study_close"),
    path("studies/<id:study_id>/reopen/", studies.study_reopen, name="study_reopen"),
    path("studies/<id:study_id>/delete/", studies.study_delete, name="study_delete"),
    path("studies/<id:study_id>/judgments/<id:judgment_id>/void/", studies.judgment_void, name="judgment_void"),
]
