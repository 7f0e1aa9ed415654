"""Every process but a data command loads the URLconf at start (the system checks, each
Celery worker, each web worker); the statistics, model and client libraries load where they
compute, so starting a command does not pay for scipy.stats (over a second), statsmodels, the
openai client or torch. Views reach the modules that compute through thin modules that name them
(evaluation.reports, judges.reranker) or through Celery task names."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "scipy",
    "statsmodels",
    "sklearn",
    "pandas",
    "krippendorff",
    "torch",
    "transformers",
    "sentence_transformers",
    "spacy",
    "openai",
    "datasets",
)
ENV = {"DJANGO_SETTINGS_MODULE": "marginalia.settings", "PATH": "/usr/bin:/bin"}
REPORT = f"import sys; print(','.join(name for name in {HEAVY!r} if name in sys.modules), file=sys.stderr)"


def heavy_modules_loaded(python: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", python], cwd=ROOT, env=ENV, capture_output=True, text=True, check=True
    )
    return result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""


def test_loading_the_urlconf_and_running_the_checks_imports_no_heavy_library():
    probe = (
        "import sys, django; django.setup();"
        "from django.core.management import call_command; import io; call_command('check', stdout=io.StringIO());"
        "import marginalia.urls;"
    )
    assert heavy_modules_loaded(probe + REPORT) == ""


def test_a_management_command_imports_no_heavy_library():
    """`manage.py check` as a process runs it: settings, every app's ready(), the URLconf."""
    probe = (
        "import atexit, sys; sys.argv = ['manage.py', 'check'];"
        f"atexit.register(lambda: exec({REPORT!r}));"
        "import runpy; runpy.run_path('manage.py', run_name='__main__')"
    )
    assert heavy_modules_loaded(probe) == ""


def test_a_data_command_checks_everything_but_the_urlconf_which_it_never_loads(tmp_path):
    """Imports, exports and runs read no URL: their system checks leave out the URLconf's (the
    views, serializers and API schema), which `manage.py check` and the web processes still run."""
    probe = (
        "import atexit, sys; sys.argv = ['manage.py', 'export_run', '999999'];"
        "atexit.register(lambda: print('marginalia.urls' in sys.modules, file=sys.stderr));"
        "import runpy; runpy.run_path('manage.py', run_name='__main__')"
    )
    env = {**ENV, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "MARGINALIA_DATA_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert "no run with id '999999'" in result.stderr and result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == "False"
