"""Retrieval routes: the staff REST API under /api/ and the staff dashboard at /dashboard/.

A SimpleRouter (no API root view), so /api/ stays free for the other apps' routes."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from retrieval import api, views

router = SimpleRouter()
router.register("collections", api.CollectionViewSet, basename="collection")
router.register("queries", api.QueryViewSet, basename="query")
router.register("runs", api.RunViewSet, basename="run")
router.register("retrievers", api.RetrieverViewSet, basename="retriever")

urlpatterns = [
    path("api/", include(router.urls)),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("dashboard/train/", views.start_training, name="dashboard-train"),
]
