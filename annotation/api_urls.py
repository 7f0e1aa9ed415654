"""Annotator and staff REST routes for studies (mounted under /api/ by annotation/urls.py)."""
from django.urls import path  # noqa: F401

urlpatterns = []
