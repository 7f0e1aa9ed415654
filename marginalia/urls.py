"""Top-level routes: each app owns its pages and API routes; the OpenAPI schema is public to
signed-in users at /api/schema/. Routes name ids with `<id:...>` (marginalia.converters),
registered here before any app's routes are read."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, register_converter
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import IsAuthenticated

from marginalia.converters import DatabaseIdConverter

register_converter(DatabaseIdConverter, "id")

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="api-schema"),
    path("", include("jobs.urls")),
    path("", include("retrieval.urls")),
    path("", include("annotation.urls")),
    path("", include("evaluation.urls")),
    path("", include("console.urls")),
    path("", include("integrations.urls")),
    path("", include("judges.urls")),
]
