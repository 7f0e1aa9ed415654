"""Retrieval routes: the staff REST API under /api/ (the dashboard is console/).

A SimpleRouter (no API root view), so /api/ stays free for the other apps' routes."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from retrieval import api

router = SimpleRouter()
router.register("collections", api.CollectionViewSet, basename="collection")
router.register("queries", api.QueryViewSet, basename="query")
router.register("runs", api.RunViewSet, basename="run")
router.register("retrievers", api.RetrieverViewSet, basename="retriever")

urlpatterns = [
    path("api/", include(router.urls)),
]
