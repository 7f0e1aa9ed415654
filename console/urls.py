"""The staff pages: dashboard, jobs, collections, runs, studies and uploads; the API root and its
documentation (Swagger UI) (the annotation app keeps study
creation, quality and adjudication; evaluation keeps the reports)."""

from django.urls import path
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework.permissions import IsAuthenticated

from console import api, data_api
from console.views import (
    collections,
    dashboard,
    data_manager,
    jobs,
    judge_agreement,
    leaderboards,
    runs,
    studies,
    uploads,
)

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
    path(
        "collections/<id:collection_id>/judge-agreement/",
        judge_agreement.collection_judge_agreement,
        name="collection_judge_agreement",
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
    # The data manager: pages (console/views/data_manager.py) and REST (console/data_api.py).
    path("studies/<id:study_id>/data/", data_manager.study_items, name="data_study_items"),
    path("studies/<id:study_id>/data/jump/", data_manager.study_item_jump, name="data_study_item_jump"),
    path("studies/<id:study_id>/data/bulk/", data_manager.study_items_bulk, name="data_study_items_bulk"),
    path("studies/<id:study_id>/data/export/", data_manager.study_items_export, name="data_study_items_export"),
    path("studies/<id:study_id>/data/revisions/", data_manager.study_revisions_setting, name="data_study_revisions"),
    path("studies/<id:study_id>/data/items/<id:item_id>/", data_manager.study_item, name="data_study_item"),
    path(
        "studies/<id:study_id>/data/items/<id:item_id>/send-back/",
        data_manager.study_item_send_back,
        name="data_study_item_send_back",
    ),
    path(
        "studies/<id:study_id>/data/items/<id:item_id>/judgments/<id:judgment_id>/void/",
        data_manager.study_item_void,
        name="data_study_item_void",
    ),
    path("runs/<id:run_id>/queries/", data_manager.run_queries, name="data_run_queries"),
    path("runs/<id:run_id>/queries/jump/", data_manager.run_query_jump_view, name="data_run_query_jump"),
    path("runs/<id:run_id>/queries/export/", data_manager.run_queries_export, name="data_run_queries_export"),
    path("runs/<id:run_id>/queries/<id:query_id>/", data_manager.run_query, name="data_run_query"),
    path("collections/<id:collection_id>/queries/", data_manager.collection_queries, name="data_collection_queries"),
    path(
        "collections/<id:collection_id>/queries/jump/",
        data_manager.collection_query_jump_view,
        name="data_collection_query_jump",
    ),
    path(
        "collections/<id:collection_id>/queries/export/",
        data_manager.collection_queries_export,
        name="data_collection_queries_export",
    ),
    path(
        "collections/<id:collection_id>/queries/<id:query_id>/",
        data_manager.collection_query,
        name="data_collection_query",
    ),
    path("api/studies/<id:study_id>/data/items/", data_api.StudyItemsView.as_view(), name="api-data-study-items"),
    path(
        "api/studies/<id:study_id>/data/items/<id:item_id>/",
        data_api.StudyItemView.as_view(),
        name="api-data-study-item",
    ),
    path("api/studies/<id:study_id>/data/jump/", data_api.StudyJumpView.as_view(), name="api-data-study-jump"),
    path("api/studies/<id:study_id>/data/void/", data_api.StudyVoidView.as_view(), name="api-data-study-void"),
    path(
        "api/studies/<id:study_id>/data/send-back/",
        data_api.StudySendBackView.as_view(),
        name="api-data-study-send-back",
    ),
    path("api/studies/<id:study_id>/data/export/", data_api.StudyExportView.as_view(), name="api-data-study-export"),
    path(
        "api/studies/<id:study_id>/answer-revisions/",
        data_api.StudyRevisionsSettingView.as_view(),
        name="api-data-study-revisions",
    ),
    path("api/runs/<id:run_id>/data/queries/", data_api.RunQueriesView.as_view(), name="api-data-run-queries"),
    path(
        "api/runs/<id:run_id>/data/queries/<id:query_id>/", data_api.RunQueryView.as_view(), name="api-data-run-query"
    ),
    path("api/runs/<id:run_id>/data/jump/", data_api.RunQueryJumpView.as_view(), name="api-data-run-jump"),
    path("api/runs/<id:run_id>/data/export/", data_api.RunQueriesExportView.as_view(), name="api-data-run-export"),
    path(
        "api/collections/<id:collection_id>/data/queries/",
        data_api.CollectionQueriesView.as_view(),
        name="api-data-collection-queries",
    ),
    path(
        "api/collections/<id:collection_id>/data/queries/<id:query_id>/",
        data_api.CollectionQueryView.as_view(),
        name="api-data-collection-query",
    ),
    path(
        "api/collections/<id:collection_id>/data/jump/",
        data_api.CollectionQueryJumpView.as_view(),
        name="api-data-collection-jump",
    ),
    path(
        "api/collections/<id:collection_id>/data/export/",
        data_api.CollectionQueriesExportView.as_view(),
        name="api-data-collection-export",
    ),
]
