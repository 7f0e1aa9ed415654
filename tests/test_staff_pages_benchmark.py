"""benchmarks/staff_pages.py asks every staff route of a study it builds and finds none failing
(the 100K-item figures in docs/deployment.md come from the same script at full size)."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_staff_route_answers_without_a_server_error_on_a_built_study():
    result = subprocess.run(
        [sys.executable, "benchmarks/staff_pages.py", "--items", "120"],
        cwd=ROOT,
        env={key: value for key, value in os.environ.items() if key != "DATABASE_URL"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "0 routes failed" in result.stdout, result.stdout
    timed = re.findall(r"^(/\S+)\s+(\d{3})\s", result.stdout, re.M)
    assert ("/studies/1/", "200") in timed and ("/studies/1/adjudicate/", "200") in timed
    assert len(timed) > 40
