"""Shared test set-up: offline model loading, the real-data folder, the CI rule that data and
browser tests fail (not skip) when what they need is missing, and fixtures several suites use
(a per-test data folder, a signed-in staff client)."""

import os
from pathlib import Path

import hypothesis
import pytest

from tests.factories import make_user

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Beside the project (CI, the main checkout); MARGINALIA_SHARED_DATA names it elsewhere (a worktree).
SHARED_DATA = Path(os.environ.get("MARGINALIA_SHARED_DATA") or PROJECT_ROOT.parent / "shared" / "data")
# Redis + Celery worker fixtures (redis_url, platform, worker) for tests of real background work.
pytest_plugins = ["tests.live_platform"]

# Property tests check results, not speed: a loaded CI machine must not fail them for being slow.
hypothesis.settings.register_profile(
    "marginalia", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("marginalia")

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(condition: bool, reason: str) -> None:
    """Skip locally when a prerequisite is missing; in CI the same gap is a failure."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{reason} (mandatory in CI)")
    pytest.skip(reason)


@pytest.fixture
def shared_data() -> Path:
    require(SHARED_DATA.is_dir(), f"real data folder {SHARED_DATA} is missing")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Real hashing costs ~0.3 s per user; tests create many users and test no crypto."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path) -> Path:
    """MARGINALIA_DATA_DIR (models, embedding and term-count caches, work folders) in this test's
    own folder, for every test: no test reads another's cache or writes into the project."""
    settings.MARGINALIA_DATA_DIR = tmp_path
    return tmp_path


@pytest.fixture
def staff_client(client, db):
    """The test client, signed in as a staff member (the staff pages' everyday visitor)."""
    client.force_login(make_user("curator", staff=True))
    return client
