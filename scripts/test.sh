#!/usr/bin/env bash
# Run Marginalia's tests: prepares .venv with requirements-test.txt, then `python -m pytest` with
# any arguments passed through (e.g. scripts/test.sh tests/retrieval -k bm25). The exit status is
# pytest's own, so "no tests collected" (5) stays a failure.
set -euo pipefail

cd "$(dirname "$0")/.."
scripts/bootstrap.sh requirements-test.txt
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} TRANSFORMERS_OFFLINE=${TRANSFORMERS_OFFLINE:-1}
exec .venv/bin/python -m pytest "$@"
