"""Marginalia: human judgments for hard retrieval.

The Celery app lives in marginalia/celery.py, where `celery -A marginalia` finds it. Celery's
Django guide imports it here; instead jobs.services, the one place that sends tasks, imports it,
so a process loads Celery (about 0.15 s) when it queues or runs work, not at every start.
"""
