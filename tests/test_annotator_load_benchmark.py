"""The annotator load benchmark runs end to end (tiny: a few annotators for a few seconds on a
scratch SQLite database behind a real gunicorn) and its own checks pass: every accepted
submission stored, none duplicated or over-assigned, no server error."""

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.migrated import copy_migrated_sqlite

ROOT = Path(__file__).resolve().parents[1]


def test_the_load_benchmark_drives_annotators_through_gunicorn_and_counts_the_database(tmp_path):
    migrated = tmp_path / "migrated.sqlite3"
    copy_migrated_sqlite(migrated)  # as trec_scale passes its scratch database's migrated copy
    result = subprocess.run(
        [
            sys.executable,
            "benchmarks/annotator_load.py",
            "--database",
            "sqlite",
            "--migrated-database",
            f"sqlite:///{migrated}",
            "--mode",
            "flat",
            "--annotators",
            "4",
            "--seconds",
            "3",
            "--items",
            "30",
            "--workers",
            "2",
            "--double-share",
            "0.5",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert lines[1].startswith("database") and lines[2].startswith("sqlite    flat")
    run = json.loads(lines[-1])
    assert run["requests"] > 0 and run["judgments"] > 0 and run["double_submits"] > 0
    assert run["accepted"] == run["judgments"]
    assert (run["lost"], run["duplicated"], run["over_assigned"], run["server_errors"]) == (0, 0, 0, 0)
    assert run["double_accepted"] == 0
    assert run["next_p50_ms"] > 0 and run["submit_p95_ms"] >= run["submit_p50_ms"]
