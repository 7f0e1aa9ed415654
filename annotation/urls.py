from django.urls import include, path

urlpatterns = [
    path("api/", include("annotation.api_urls")),
]
