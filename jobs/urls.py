"""Job routes under /api/jobs/."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from jobs import api

router = SimpleRouter()
router.register("jobs", api.JobViewSet, basename="job")

urlpatterns = [path("api/", include(router.urls))]
