"""Retrieval's business rules: plain functions that commands, API views and Celery tasks all call."""
