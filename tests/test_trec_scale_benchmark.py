"""benchmarks/trec_scale.py runs end to end at its tiny size (an import, a BM25 run and the
annotator API with 1 and 2 workers; real Celery workers, Redis and gunicorn) and keeps its
contract: the last line is one JSON object with `import`, `bm25` and `annotators`, each with
per-worker-count figures and the speed-up against one worker."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.data
@pytest.mark.redis
def test_the_trec_scale_benchmark_runs_at_a_tiny_size_and_prints_its_contract(shared_data):
    result = subprocess.run(
        [sys.executable, "benchmarks/trec_scale.py", "--tiny", "--json", "--data", str(shared_data)],
        cwd=ROOT,
        env={**{key: value for key, value in os.environ.items() if key != "DATABASE_URL"}, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    for step in ("import", "bm25", "annotators"):
        assert set(figures[step]["workers"]) == {"1", "2"}, step
        assert figures[step]["speedup"]["1"] == 1.0 and figures[step]["speedup"]["2"] > 0, step
    for step in ("import", "bm25"):
        assert all(seconds > 0 for seconds in figures[step]["workers"].values())
        assert figures[step]["full_relic_s"]["1"] > figures[step]["workers"]["1"]
    for entry in figures["annotators"]["workers"].values():
        assert entry["flat"]["requests_per_second"] > 0 and entry["realistic"]["next_p95_ms"] > 0
        assert (entry["lost"], entry["server_errors"]) == (0, 0)
    assert "EXTRAPOLATED" in result.stdout
