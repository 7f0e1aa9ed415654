#!/usr/bin/env bash
# Run Marginalia's tests: prepares .venv with requirements-test.txt, then `python -m pytest` with
# any arguments passed through (e.g. scripts/test.sh tests/retrieval -k bm25). The exit status is
# pytest's own, so "no tests collected" (5) stays a failure.
#
# The tests run in parallel (pytest-xdist), one process per core up to four, a test file per
# process at a time: most of the suite's time is spent waiting on the servers tests start (Redis,
# Celery workers, gunicorn, Chromium), not computing. Every test has its own database (pytest-django
# adds the process's name), data folder and free ports. MARGINALIA_TEST_WORKERS=0 runs them in one
# process (what a debugger needs); a number sets the process count.
set -euo pipefail

cd "$(dirname "$0")/.."
scripts/bootstrap.sh requirements-test.txt
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TRANSFORMERS_OFFLINE=${TRANSFORMERS_OFFLINE:-1}
workers=${MARGINALIA_TEST_WORKERS:-auto}
exec .venv/bin/python -m pytest -n "$workers" --maxprocesses 4 --dist loadfile "$@"
