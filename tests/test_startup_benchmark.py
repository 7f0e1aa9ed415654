"""benchmarks/startup.py times each command's start against a bare Django project made in the
same run (the figures in docs/deployment.md come from it with --runs 7)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_startup_benchmark_times_our_commands_and_a_bare_django_project():
    result = subprocess.run(
        [sys.executable, "benchmarks/startup.py", "--runs", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    rows = dict(re.findall(r"^(\S.*?)\s+\d+\.\d\d\s+\d+\.\d\d\s+(\d+\.\d\d)$", result.stdout, re.M))
    assert set(rows) == {
        "export_run 999999",
        "export_study 999999",
        "export_judgments 999999",
        "import_judgments 999999 missing.jsonl",
        "help",
        "check",
        "bare Django project: check",
        "bare Django project: help",
    }
    assert rows["bare Django project: check"] == "1.00"
