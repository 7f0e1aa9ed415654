"""Celery tasks of the staff pages: importing an upload (routed to the cpu queue by name in
marginalia/celery.py)."""

from celery import shared_task

from .uploads import PROCESS_UPLOAD_TASK, run_upload


@shared_task(name=PROCESS_UPLOAD_TASK)
def process_upload(job_id: int) -> dict:
    return run_upload(job_id)
