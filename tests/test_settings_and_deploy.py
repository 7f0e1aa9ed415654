"""Settings come from the environment and are safe in production; the one-command local platform
(run_platform) starts, serves and stops cleanly; the demo data is what its sources say it is and
seeding it twice changes nothing."""

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from annotation.models import Study
from benchmarks.migrated import copy_migrated_sqlite
from demo import build_relic
from demo.accounts import demo_accounts
from demo.seed import DEMO_COLLECTION, DEMO_STUDY, DEMO_STUDY_ITEMS
from jobs.management.commands.run_platform import Supervisor, free_port, stop_process, worker_commands
from retrieval.models import Collection, Run
from retrieval.segmentation import split_sentences
from tests.conftest import PROJECT_ROOT
from tests.factories import celery_client

MANAGE = [sys.executable, str(PROJECT_ROOT / "manage.py")]
PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": "k" * 20 + uuid.uuid4().hex * 2,
    "DJANGO_ALLOWED_HOSTS": "example.org",
}


def environment(**overrides) -> dict[str, str]:
    """This process's environment without any Marginalia/Django settings, plus `overrides`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_", "MARGINALIA_"))
    }
    return {**env, **overrides}


def settings_seen_with(**env) -> dict:
    """Selected settings as a fresh process computes them from `env`."""
    code = (
        "import json, django; from django.conf import settings; django.setup(); "
        "print(json.dumps({'database': settings.DATABASES['default'], 'broker': settings.CELERY_BROKER_URL, "
        "'debug': settings.DEBUG, 'hosts': settings.ALLOWED_HOSTS, "
        "'data_dir': str(settings.MARGINALIA_DATA_DIR)}, default=str))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env=environment(DJANGO_SETTINGS_MODULE="marginalia.settings", **env),
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_production_settings_pass_the_deployment_checks():
    result = subprocess.run(
        [*MANAGE, "check", "--deploy", "--fail-level", "WARNING"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env=environment(**PRODUCTION),
    )
    assert result.returncode == 0, result.stderr


def test_production_without_a_secret_key_refuses_to_start_and_says_why():
    result = subprocess.run(
        [*MANAGE, "check"], cwd=PROJECT_ROOT, capture_output=True, text=True, env=environment(DJANGO_DEBUG="0")
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in result.stderr


def test_database_broker_and_data_folder_come_from_the_environment():
    seen = settings_seen_with(
        **PRODUCTION,
        DATABASE_URL="postgres://marginalia:s3cret@db.internal:5433/judgments",
        REDIS_URL="redis://broker.internal:6379/2",
        MARGINALIA_DATA_DIR="/srv/marginalia",
    )
    database = seen["database"]
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["NAME"], database["USER"], database["PASSWORD"]) == ("judgments", "marginalia", "s3cret")
    assert (database["HOST"], database["PORT"]) == ("db.internal", 5433)
    assert seen["broker"] == "redis://broker.internal:6379/2"
    assert (seen["debug"], seen["hosts"], seen["data_dir"]) == (False, ["example.org"], "/srv/marginalia")


def test_the_local_default_is_sqlite_in_the_project_waiting_for_locks():
    database = settings_seen_with()["database"]
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert Path(database["NAME"]) == PROJECT_ROOT / "db.sqlite3"
    assert database["OPTIONS"]["timeout"] >= 10


def test_the_openapi_schema_generates_without_warnings(tmp_path):
    call_command("spectacular", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/runs/{id}/trec/" in (tmp_path / "schema.yaml").read_text()


# --- the demo ---------------------------------------------------------------------------------


def test_the_demo_relic_file_is_generated_from_the_book_and_its_contexts():
    committed = json.loads(build_relic.OUTPUT_PATH.read_text(encoding="utf-8"))
    regenerated = build_relic.build(
        build_relic.BOOK_PATH.read_text(encoding="utf-8"),
        build_relic.yaml.safe_load(build_relic.CONTEXTS_PATH.read_text(encoding="utf-8")),
    )
    assert committed == regenerated, "run `python -m demo.build_relic` and commit the result"


def test_every_demo_quote_is_whole_sentences_of_the_book_inside_its_contexts():
    book = json.loads(build_relic.OUTPUT_PATH.read_text(encoding="utf-8"))[build_relic.BOOK_ID]
    contexts = {c["id"]: c for c in build_relic.yaml.safe_load(build_relic.CONTEXTS_PATH.read_text(encoding="utf-8"))}
    assert 150 <= len(book["sentences"]) <= 250
    assert 20 <= len(book["quotes"]) <= 30
    assert sum(length == 1 for _, _, length, _ in book["quotes"].values()) >= DEMO_STUDY_ITEMS
    for quote_id, (left, start, length, right) in book["quotes"].items():
        assert book["sentences"][start : start + length] == split_sentences(contexts[quote_id]["quote"])
        assert 1 <= len(left) <= 4 and 1 <= len(right) <= 4


@pytest.mark.django_db
def test_seeding_the_demo_twice_gives_one_of_everything_and_working_accounts():
    call_command("seed_demo", stdout=io.StringIO())
    call_command("seed_demo", stdout=io.StringIO())

    collection = Collection.objects.get(name=DEMO_COLLECTION)
    study = Study.objects.get(name=DEMO_STUDY)
    assert Run.objects.filter(collection=collection).count() == 1
    assert Run.objects.get(collection=collection).status == Run.Status.DONE
    assert study.items.count() == DEMO_STUDY_ITEMS
    assert study.negatives_run.collection == collection
    for account in demo_accounts():
        # Sign-in is throttled per address, so authentication needs the request it came with.
        sign_in = RequestFactory().post("/accounts/login/")
        user = authenticate(sign_in, username=account.username, password=account.password)
        assert user is not None and user.is_staff == account.is_staff
    assert set(study.annotators.values_list("username", flat=True)) == {
        account.username for account in demo_accounts() if not account.is_staff
    }


# --- run_platform -----------------------------------------------------------------------------


def test_the_supervisor_stops_everything_when_one_child_dies():
    supervisor = Supervisor()
    sleeper = supervisor.start("sleeper", [sys.executable, "-c", "import time; time.sleep(300)"], dict(os.environ))
    supervisor.start("crasher", [sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ))

    dead = supervisor.wait(poll_seconds=0.05)
    supervisor.stop_all()

    assert dead == ("crasher", 3)
    assert sleeper.poll() is not None


def test_run_platform_starts_one_worker_per_queue_and_refuses_odd_queue_settings_in_one_line():
    assert [
        (name, words[words.index("-Q") + 1], words[words.index("--concurrency") + 1])
        for name, words in worker_commands()
    ] == [
        ("celery worker (cpu)", "cpu", "2"),
        ("celery worker (long)", "long", "1"),
        ("celery worker (gpu)", "gpu", "1"),
    ]
    assert [words[words.index("--concurrency") + 1] for _, words in worker_commands("gpu,cpu", "cpu=4")] == ["1", "4"]
    for queues, concurrency, refusal in [
        ("cpu,fast", "", "--queues: use some of cpu, long, gpu, got 'cpu,fast'"),
        ("cpu", "cpu=0", "--concurrency: 'cpu=0' is not QUEUE=N"),
        ("cpu", "gpu=two", "--concurrency: 'gpu=two' is not QUEUE=N"),
    ]:
        with pytest.raises(CommandError, match=re.escape(refusal)):
            worker_commands(queues, concurrency)


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment carries `marker` (every child inherits it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def answers(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except OSError:
        return None


def port_accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.redis
def test_run_platform_serves_runs_tasks_and_stops_every_child_on_ctrl_c(tmp_path):
    web_port, redis_port, marker = free_port(), free_port(), f"MARGINALIA_TEST_RUN={uuid.uuid4().hex}"
    env = environment(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        MARGINALIA_TEST_RUN=marker.split("=")[1],
        MARGINALIA_DATA_DIR=str(tmp_path / "data"),
        MARGINALIA_SWEEP_SECONDS="1",
    )
    copy_migrated_sqlite(tmp_path / "db.sqlite3")
    platform = subprocess.Popen(
        [*MANAGE, "run_platform", "--port", str(web_port), "--redis-port", str(redis_port)],
        env=env,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while answers(f"http://127.0.0.1:{web_port}/accounts/login/") != 200 and platform.poll() is None:
            assert time.monotonic() < deadline, "the web server did not answer"
            time.sleep(0.5)
        ping = celery_client(f"redis://127.0.0.1:{redis_port}/0").send_task("jobs.tasks.ping", queue="gpu")
        assert ping.get(timeout=120) == "pong"
        assert len(processes_with(marker)) >= 5  # run_platform, redis-server, worker (and its child), beat, web
        # A command started on its own, not by run_platform, prints links on the port it listens on.
        invited = subprocess.run(
            [*MANAGE, "invite_annotator", "--json"], env=env, cwd=PROJECT_ROOT, capture_output=True, text=True
        )
        link = json.loads(invited.stdout.strip().splitlines()[-1])["url"]
        assert link.startswith(f"http://127.0.0.1:{web_port}/invitations/") and answers(link) == 200
        time.sleep(3)  # beat sends the stale-job sweep every second; the worker runs it

        platform.send_signal(signal.SIGINT)
        output, _ = platform.communicate(timeout=90)
    finally:
        if platform.poll() is None:
            stop_process(platform)

    assert platform.returncode == 0, output
    assert f"http://127.0.0.1:{web_port}/" in output and "Stopped (SIGINT)" in output
    assert "Task jobs.tasks.sweep_stale_jobs" in output and "succeeded" in output
    assert processes_with(marker) == []
    assert not (tmp_path / "data" / "public-address").exists()  # withdrawn at the stop
    assert not port_accepts(web_port) and not port_accepts(redis_port)
