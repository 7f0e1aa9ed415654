"""Every process loads the URLconf at start (system checks before each management command, each
Celery worker, each web worker); the statistics and model libraries load where they compute, so
starting a command does not pay for scipy.stats (over a second) or torch."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy", "torch", "sentence_transformers", "spacy", "sklearn", "statsmodels", "krippendorff", "pandas")


def test_loading_the_urlconf_and_running_the_checks_imports_no_heavy_library():
    probe = (
        "import sys, django; django.setup();"
        "from django.core.management import call_command; import io; call_command('check', stdout=io.StringIO());"
        "import marginalia.urls;"
        f"print(','.join(name for name in {HEAVY!r} if name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={"DJANGO_SETTINGS_MODULE": "marginalia.settings", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == ""
