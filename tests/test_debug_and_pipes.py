"""Errors and pipes as users meet them: DEBUG is off unless a developer asks, so a 500 shows no
traceback; streaming commands stop quietly, exit status 0, when their reader closes the pipe
(`export_study ID | head`)."""

import os
import subprocess

import pytest
from django.db import connection

from retrieval.models import Run
from tests.factories import make_neighbour_run, make_relic_collection, make_relic_proxy_study
from tests.test_settings_and_deploy import MANAGE, PRODUCTION, PROJECT_ROOT, environment, settings_seen_with

# A view that fails, added to the project's routes in a fresh process started without any
# setting, as `./scripts/run.sh` and `run_platform` start the web server.
FAILING_REQUEST = """
import django
django.setup()
from django.test import Client
from django.urls import path
import marginalia.urls

def fail(request):
    raise RuntimeError("internal detail 7f3a")

marginalia.urls.urlpatterns.append(path("fail/", fail))
client = Client(raise_request_exception=False)
page = client.get("/fail/", HTTP_HOST="localhost")
css = client.get("/static/css/marginalia.css", HTTP_HOST="localhost")
print(page.status_code, css.status_code)
print(page.content.decode())
"""


@pytest.mark.parametrize(
    "env, debug",
    [
        ({}, False),
        ({"MARGINALIA_DEBUG": "1"}, True),
        ({"DJANGO_DEBUG": "1"}, True),
        ({**PRODUCTION, "MARGINALIA_DEBUG": "1"}, False),
    ],
    ids=["default", "developer-asks", "django-debug", "never-in-production"],
)
def test_debug_is_off_unless_a_developer_asks(env, debug):
    assert settings_seen_with(**env)["debug"] is debug


def test_a_server_error_shows_a_page_without_traceback():
    result = subprocess.run(
        [MANAGE[0], "-c", FAILING_REQUEST],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env=environment(DJANGO_SETTINGS_MODULE="marginalia.settings"),
    )
    assert result.returncode == 0, result.stderr
    statuses, page = result.stdout.split("\n", 1)
    assert statuses == "500 200"  # the error page, and static files still served locally
    assert "Something went wrong" in page and "marginalia.css" in page
    assert "internal detail 7f3a" not in page and "Traceback" not in page


def database_url() -> str:
    """The test database, for a command run in another process."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def run_into_closed_pipe(*arguments) -> subprocess.CompletedProcess:
    """Run a command whose stdout is a pipe nobody reads any more (`| head` after it quit)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [*MANAGE, *map(str, arguments)],
            cwd=PROJECT_ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(DATABASE_URL=database_url()),
        )
    finally:
        os.close(write_end)


@pytest.mark.django_db(transaction=True)
def test_streaming_commands_exit_cleanly_when_the_reader_stops():
    collection = make_relic_collection(4)
    run = make_neighbour_run(collection)
    study = make_relic_proxy_study(2)
    assert Run.objects.filter(pk=run.pk).exists()

    for arguments in (["export_study", study.pk], ["export_run", run.pk], ["evaluate_run", run.pk, "--json"]):
        result = run_into_closed_pipe(*arguments)
        assert (result.returncode, result.stderr) == (0, ""), arguments
