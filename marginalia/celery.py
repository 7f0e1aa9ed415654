"""The Celery app and its three queues, so that long work never holds back short work:

- "cpu": short work someone waits for (seconds to a few minutes): BM25 run shards, uploads and
  run imports, reports, webhook deliveries, the stale-job sweep, ping;
- "long": long work that needs no GPU (minutes to hours, mostly waiting on another server):
  judging through an OpenAI-compatible endpoint (and judges that read a run's scores);
- "gpu": model work, on the GPU where there is one: dense encoding, training, local judges.

Each queue has its own workers (run_platform starts one per queue; docker-compose has a service
per queue), so a ten-minute judge on "long" or "gpu" leaves the "cpu" workers free for a BM25
run. A job is sent to the queue recorded on its row (jobs.services); the routes below place
tasks sent without a job (webhook deliveries) and document where each task belongs.
docs/deployment.md ("Queues and workers") explains the choice.
"""

import os

from celery import Celery
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")

app = Celery("marginalia")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Each queue gets its own exchange and routing key. Bare Queue("gpu") would be bound to the
# default exchange and key ("cpu"), so every task would land in both queues.
QUEUES = ("cpu", "long", "gpu")
app.conf.task_queues = tuple(Queue(name, Exchange(name, type="direct"), routing_key=name) for name in QUEUES)
app.conf.task_routes = {
    "retrieval.tasks.run_bm25": {"queue": "cpu"},
    "retrieval.tasks.run_dense": {"queue": "gpu"},
    "retrieval.tasks.train_retriever": {"queue": "gpu"},
    "annotation.tasks.train_on_study": {"queue": "gpu"},
    "retrieval.tasks.import_run": {"queue": "cpu"},
    "jobs.tasks.ping": {"queue": "cpu"},
    "console.tasks.process_upload": {"queue": "cpu"},
    "judges.tasks.judge_study_on_gpu": {"queue": "gpu"},
    # Endpoint and run judges (the name is older than the "long" queue; stored jobs retry by it).
    "judges.tasks.judge_study_on_cpu": {"queue": "long"},
    "jobs.tasks.sweep_stale_jobs": {"queue": "cpu"},
    "evaluation.tasks.compute_study_report": {"queue": "cpu"},
    "evaluation.tasks.watch_agreement": {"queue": "cpu"},
    "integrations.tasks.deliver_webhook": {"queue": "cpu"},
    "integrations.tasks.redeliver_webhooks": {"queue": "cpu"},
}
app.autodiscover_tasks()
