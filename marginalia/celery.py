"""The Celery app. Queues: "cpu" (BM25 runs, reports) and "gpu" (dense encoding, training).

Routing is by task name, so a GPU node runs `celery -A marginalia worker -Q gpu` and receives
only the work that benefits from it.
"""

import os

from celery import Celery
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")

app = Celery("marginalia")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each queue gets its own exchange and routing key. Bare Queue("gpu") would be bound to the
# default exchange and key ("cpu"), so every task would land in both queues.
app.conf.task_queues = tuple(Queue(name, Exchange(name, type="direct"), routing_key=name) for name in ("cpu", "gpu"))
app.conf.task_routes = {
    "retrieval.tasks.run_bm25": {"queue": "cpu"},
    "retrieval.tasks.run_dense": {"queue": "gpu"},
    "retrieval.tasks.train_retriever": {"queue": "gpu"},
    "retrieval.tasks.import_run": {"queue": "cpu"},
    "jobs.tasks.ping": {"queue": "cpu"},
    "console.tasks.process_upload": {"queue": "cpu"},
    "judges.tasks.judge_study_on_gpu": {"queue": "gpu"},
    "judges.tasks.judge_study_on_cpu": {"queue": "cpu"},
    "judges.tasks.label_pool_on_gpu": {"queue": "gpu"},
    "judges.tasks.label_pool_on_cpu": {"queue": "cpu"},
    "judges.tasks.post_edit_on_gpu": {"queue": "gpu"},
    "judges.tasks.post_edit_on_cpu": {"queue": "cpu"},
    "jobs.tasks.sweep_stale_jobs": {"queue": "cpu"},
    "evaluation.tasks.compute_study_report": {"queue": "cpu"},
    "evaluation.tasks.judge_card_on_gpu": {"queue": "gpu"},
    "evaluation.tasks.judge_card_on_cpu": {"queue": "cpu"},
}
app.autodiscover_tasks()
