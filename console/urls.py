"""The staff pages: dashboard and studies (the annotation app keeps study creation, quality and
adjudication; evaluation keeps the reports)."""

from django.urls import path

from console.views import dashboard, studies

urlpatterns = [
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("dashboard/train/", dashboard.start_training, name="dashboard-train"),
    path("studies/", studies.study_list, name="study_list"),
    path("studies/<int:study_id>/", studies.study_detail, name="study_detail"),
    path("studies/<int:study_id>/train/", studies.study_train, name="study_train"),
    path("studies/<int:study_id>/judgments/<int:judgment_id>/void/", studies.judgment_void, name="judgment_void"),
]
