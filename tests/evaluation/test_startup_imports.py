"""Every process but a data command loads the URLconf at start (the system checks, each
Celery worker, each web worker); the statistics, model and client libraries load where they
compute, so starting a command does not pay for scipy.stats (over a second), statsmodels, the
openai client or torch. Views reach the modules that compute through thin modules that name them
(evaluation.reports, judges.reranker) or through Celery task names."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.migrated import copy_migrated_sqlite

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


# What a data command must not load: the URLconf (views, serializers, API schema), the Celery
# app (only commands that queue work need it), DRF's serializers with psycopg and
# django.contrib.postgres (imported by its pagination check and template tags), numpy.
WEB_AND_QUEUE = ("marginalia.urls", "celery", "rest_framework.serializers", "django.contrib.postgres", "numpy")


@pytest.mark.parametrize(
    "arguments, refusal",
    [
        (["export_run", "999999"], "no run with id '999999'"),
        (["export_study", "999999"], "no study with id 999999"),
        (["export_judgments", "999999"], "no study with id 999999"),
        (["import_judgments", "999999", "missing.jsonl"], "no study with id 999999"),
    ],
)
def test_a_data_command_runs_only_the_checks_about_data_and_loads_nothing_of_the_web_or_the_queue(
    tmp_path, arguments, refusal
):
    """Imports and exports read no URL, render no template and queue nothing: their system
    checks are the models', the database's and the like, which `manage.py check` and the web
    processes run with all the others."""
    probe = (
        f"import atexit, sys; sys.argv = ['manage.py', *{arguments!r}];"
        f"atexit.register(lambda: print(','.join(m for m in {WEB_AND_QUEUE!r} if m in sys.modules), file=sys.stderr));"
        "import runpy; runpy.run_path('manage.py', run_name='__main__')"
    )
    env = {**ENV, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "MARGINALIA_DATA_DIR": str(tmp_path)}
    copy_migrated_sqlite(tmp_path / "db.sqlite3")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert refusal in result.stderr and result.returncode == 1
    assert result.stderr.splitlines()[-1] == ""


def test_a_report_served_from_the_cache_loads_no_statistics_library(tmp_path):
    """`study_report` of a study whose report is stored reads the fingerprint and the stored
    payload; scipy and statsmodels (over a second) load only when a report is computed."""
    env = {**ENV, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "MARGINALIA_DATA_DIR": str(tmp_path)}
    copy_migrated_sqlite(tmp_path / "db.sqlite3")
    build = (
        "import django; django.setup();"
        "from tests.factories import make_bulk_proxy_study; from evaluation.reports import cached_study_report;"
        "cached_study_report(make_bulk_proxy_study(20))"
    )
    subprocess.run([sys.executable, "-c", build], cwd=ROOT, env=env, check=True)
    probe = (
        "import atexit, sys; sys.argv = ['manage.py', 'study_report', '1', '--json'];"
        f"atexit.register(lambda: exec({REPORT!r}));"
        "import runpy; runpy.run_path('manage.py', run_name='__main__')"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert '"complete_items": 20' in result.stdout and result.stderr.strip().splitlines()[-1:] in ([], [""])
