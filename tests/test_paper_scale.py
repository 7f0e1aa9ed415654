"""benchmarks/paper_scale.py runs end to end (every section, tiny sizes) and prints its figures."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.data
def test_the_paper_scale_benchmark_runs_at_a_tiny_size(shared_data):
    result = subprocess.run(
        [
            sys.executable,
            "benchmarks/paper_scale.py",
            *("--data", str(shared_data)),
            *("--book-sentences", "40", "--fraction", "0", "--import-books", "1", "--import-queries-per-set", "2"),
            *("--peer-queries", "3", "--rank-bm25-queries", "1", "--hits", "300", "--dense-passages", "0"),
            *("--study-items", "12", "--export-items", "6", "--json"),
        ],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["peers"]["identical_to_rank_bm25"] is True
    assert figures["hits"][0]["hits"] == 300
    assert figures["study"]["judgments"] == 36 and figures["export"]["items"] == 6
    assert figures["bm25"]["queries"] > 0 and figures["run"]["hits"] > 0
    assert "EXTRAPOLATED to full RELiC" in result.stdout
