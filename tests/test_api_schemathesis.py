"""The API under fire: schemathesis generates requests for every operation of the OpenAPI schema
and sends them to a live server (runserver in its own process, on a seeded demo database, with a
real Redis broker and no worker, so queued jobs simply wait) as staff (token), as an annotator
(token) and anonymously. Every response must be no server error and valid against the schema.
Bounded: API_EXAMPLES generated requests per operation (MARGINALIA_API_EXAMPLES), each sent as
every role."""

import json
import os
import socket
import subprocess
import time

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from benchmarks.migrated import copy_migrated_sqlite
from jobs.management.commands.run_platform import broker_environment, free_port, stop_process
from tests.live_platform import MANAGE, PROJECT_ROOT

API_EXAMPLES = int(os.environ.get("MARGINALIA_API_EXAMPLES", "5"))
ROLES = ("staff", "annotator", "anonymous")
SCHEMA = schemathesis.openapi.from_dict(
    json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
)
ISSUE_TOKENS = """
import json
from rest_framework.authtoken.models import Token
from django.contrib.auth import get_user_model
users = get_user_model().objects
print(json.dumps({role: Token.objects.get_or_create(user=users.get(username=name))[0].key
                  for role, name in (("staff", "admin"), ("annotator", "annotator1"))}))
"""


def wait_for_port(port: int, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError("the server did not start")


@pytest.fixture(scope="module")
def live_api(tmp_path_factory, redis_url):
    """{"url", "headers": role -> headers} of a server on a freshly seeded demo database."""
    folder = tmp_path_factory.mktemp("api")
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
        "MARGINALIA_DATA_DIR": str(folder / "data"),
        **broker_environment(redis_url),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    env.pop("DJANGO_DEBUG", None)
    env.pop("MARGINALIA_DEBUG", None)

    def manage(*args) -> str:
        result = subprocess.run([*MANAGE, *args], env=env, cwd=PROJECT_ROOT, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        return result.stdout

    copy_migrated_sqlite(folder / "db.sqlite3")
    manage("seed_demo")
    tokens = json.loads(manage("shell", "-c", ISSUE_TOKENS).strip().splitlines()[-1])
    port = free_port()
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        [*MANAGE, "runserver", f"127.0.0.1:{port}", "--noreload"],
        env=env,
        cwd=PROJECT_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_port(port, server)
        yield {
            "url": f"http://127.0.0.1:{port}",
            "headers": {
                "staff": {"Authorization": f"Token {tokens['staff']}"},
                "annotator": {"Authorization": f"Token {tokens['annotator']}"},
                "anonymous": {},
            },
            "log": folder / "server.log",
        }
    finally:
        stop_process(server)
        log.close()


@pytest.mark.redis
@SCHEMA.parametrize()
@settings(
    max_examples=API_EXAMPLES,
    phases=[Phase.generate],  # no schemathesis coverage phase: it sends dozens per operation
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_error_and_every_response_matches_the_schema(case, live_api):
    """Each generated request is sent once per role (staff, annotator, anonymous)."""
    for role in ROLES:
        case.call_and_validate(
            base_url=live_api["url"],
            headers=live_api["headers"][role],
            checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
            timeout=60,
        )
