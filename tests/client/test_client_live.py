"""The Python client against the live platform: a real web server (runserver) and a real
Celery worker with Redis on one database (tests/live_platform.py). A whole study through the
client: sign in for tokens (throttled, and the client waits the throttle out), list collections,
start a BM25 run and wait on its job, create a proxy study, answer every item as two annotators,
then read the report and the judgments as a DataFrame and check one against the other."""

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest
import requests
from marginalia_client import ApiError, Marginalia

from tests.client.conftest import CLIENT_FOLDER
from tests.live_platform import PROJECT_ROOT, manage

pytestmark = pytest.mark.redis

PASSWORD = "client-test-password"
ANNOTATORS = ("annotator1", "annotator2")


@pytest.fixture(scope="module")
def platform(platform):
    """Demo accounts with a known password; token requests limited to one a second."""
    platform["env"].update(MARGINALIA_DEMO_PASSWORD=PASSWORD, MARGINALIA_TOKEN_RATE="1/s")
    return platform


@pytest.fixture(scope="module")
def seeded(platform):
    return json.loads(manage(platform, "seed_demo", "--json").strip().splitlines()[-1])


def test_a_whole_study_through_the_client(web_server, seeded):
    # Three sign-ins in a row: the server throttles them (429 + Retry-After); the client waits.
    staff = Marginalia.login(web_server, "admin", PASSWORD)
    annotators = {name: Marginalia.login(web_server, name, PASSWORD) for name in ANNOTATORS}

    collections = staff.collections()
    assert isinstance(collections, pd.DataFrame) and seeded["collection"] in set(collections["name"])

    run = staff.start_run(seeded["collection"], retriever="bm25", depth=20, k1=0.5, b=0.9)
    job = staff.wait(run.job, timeout=120, poll=0.3)
    assert job.status == "succeeded" and job.progress == 1.0
    finished = staff.run(run.id)
    assert finished.status == "done" and 0.0 <= finished.evaluation["metrics"]["recall@10"] <= 1.0
    assert staff.run_trec(run.id).splitlines()[0].split()[1] == "Q0"

    study = staff.create_study(
        name="client-study",
        kind="proxy",
        collection=seeded["collection"],
        negatives_run=run.id,
        items=4,
        candidates=3,
        judgments_per_item=2,
        seed=3,
    )
    assert study["items"] >= 2 and study["id"] in set(staff.studies()["id"])

    chosen = {}
    for offset, (name, annotator) in enumerate(annotators.items()):
        work = annotator.next_item(study["id"])
        while not work["finished"]:
            position = (work["item"] + offset) % 3
            receipt = annotator.submit(study["id"], work["item"], position=position, seconds=4)
            assert "gold" not in json.dumps(receipt)
            chosen[(name, work["item"])] = position
            work = annotator.next_item(study["id"])

    judgments = staff.judgments(study["id"])
    report = staff.report(study["id"])
    assert len(judgments) == report["judgments"] == 2 * study["items"] == len(chosen)
    assert {(row.annotator, row.item): row.position for row in judgments.itertuples()} == chosen
    assert pd.api.types.is_datetime64_any_dtype(judgments["submitted_at"])
    # The report's per-annotator accuracy, recomputed from the DataFrame.
    from_frame = judgments.groupby("annotator")["correct"].mean().to_dict()
    assert from_frame == pytest.approx(report["annotator_accuracy"])

    # An annotator's token opens no staff data.
    with pytest.raises(ApiError) as refused:
        annotators["annotator1"].judgments(study["id"])
    assert refused.value.status == 403


def test_the_token_endpoint_throttles_with_a_retry_after_and_refuses_bad_passwords(web_server, seeded):
    def attempt(_):
        return requests.post(
            f"{web_server}/api/auth/token/", json={"username": "admin", "password": "wrong"}, timeout=30
        )

    with ThreadPoolExecutor(4) as pool:  # at once: a wrong password alone takes a moment to hash
        answers = list(pool.map(attempt, range(4)))
    refused = [answer for answer in answers if answer.status_code == 400]
    assert refused and "non_field_errors" in refused[0].json()
    throttled = [answer for answer in answers if answer.status_code == 429]
    assert throttled and float(throttled[0].headers["Retry-After"]) <= 1
    with pytest.raises(ApiError) as refused:
        Marginalia.login(web_server, "admin", "wrong")
    assert refused.value.status == 400


def test_the_client_imports_no_django_and_builds_as_a_package(tmp_path):
    probe = "import sys, marginalia_client; sys.exit(1 if any(m.startswith('django') for m in sys.modules) else 0)"
    subprocess.run([sys.executable, "-c", probe], cwd=CLIENT_FOLDER, check=True)
    # Built from a copy: setuptools writes build/ and *.egg-info next to the sources it builds.
    source = shutil.copytree(CLIENT_FOLDER, tmp_path / "client", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), "."],
        cwd=source,
        check=True,
        capture_output=True,
    )
    assert [wheel.name.split("-")[0] for wheel in wheels.glob("*.whl")] == ["marginalia_client"]


def test_an_upload_through_the_client_becomes_a_collection(web_server, seeded):
    staff = Marginalia.login(web_server, "admin", PASSWORD)
    assert "relic" in set(staff.upload_kinds()["kind"])
    job = staff.upload("relic", PROJECT_ROOT / "demo" / "salt_ledger_relic.json", name="uploaded-salt-ledger")
    assert staff.wait(job.id, timeout=120, poll=0.3, progress=False).status == "succeeded"
    uploaded = staff.collection("uploaded-salt-ledger")
    assert uploaded["queries"] == staff.collection(seeded["collection"])["queries"]
    with pytest.raises(ApiError) as refused:
        staff.upload("relic", PROJECT_ROOT / "README.md")
    assert refused.value.status == 400 and "file" in refused.value.detail
