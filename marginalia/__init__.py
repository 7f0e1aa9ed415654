"""Marginalia: human judgments for hard retrieval. Loads the Celery app with Django."""

from .celery import app as celery_app

__all__ = ("celery_app",)
