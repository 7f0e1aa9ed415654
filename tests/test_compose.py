"""The several-machines deployment, checked without a Docker engine: docker-compose.yml is read as
YAML and the Dockerfile as text. Services, their commands and queues, the GPU reservation, the
shared settings and data volume, and the image targets the services build."""

import re

import pytest
import yaml

from jobs.management.commands.run_platform import worker_commands
from marginalia.celery import QUEUES
from tests.conftest import PROJECT_ROOT

APP_SERVICES = ("web", "worker-cpu", "worker-long", "worker-gpu")


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())["services"]


@pytest.fixture(scope="module")
def dockerfile_stages() -> dict[str, str]:
    """Stage name -> its FROM image, from `FROM image AS name` lines."""
    text = (PROJECT_ROOT / "Dockerfile").read_text()
    return {name: image for image, name in re.findall(r"^FROM\s+(\S+)\s+AS\s+(\S+)\s*$", text, re.M | re.I)}


def command(service: dict) -> str:
    value = service["command"]
    return " ".join(value) if isinstance(value, list) else value


def test_the_deployment_has_its_database_broker_web_server_and_a_worker_per_queue(services):
    assert set(services) >= {"postgres", "redis", "web", "worker-cpu", "worker-long", "worker-gpu"}
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")


def test_the_web_server_is_gunicorn_on_the_wsgi_app(services):
    assert command(services["web"]).startswith("gunicorn marginalia.wsgi")
    assert any(str(port).endswith(":8000") for port in services["web"]["ports"])


@pytest.mark.parametrize(("service", "queue"), [("worker-cpu", "cpu"), ("worker-long", "long"), ("worker-gpu", "gpu")])
def test_each_worker_consumes_exactly_its_queue(services, service, queue):
    words = command(services[service]).split()
    assert words[:4] == ["celery", "-A", "marginalia", "worker"]
    assert words[words.index("-Q") + 1] == queue


def worker_settings(words: list[str]) -> tuple[str, str, str]:
    """(queues, concurrency, node name) of a `celery worker` command line."""
    return tuple(words[words.index(option) + 1] for option in ("-Q", "--concurrency", "--hostname"))


def test_the_compose_workers_are_the_workers_run_platform_starts_on_one_machine(services):
    """Every queue has its worker, with the processes and node name run_platform gives it, so a
    long judge holds back no short job in either deployment."""
    composed = sorted(
        worker_settings(command(service).split())
        for service in services.values()
        if "command" in service and " worker " in command(service)
    )
    on_one_machine = sorted(worker_settings(words) for _, words in worker_commands())
    assert composed == on_one_machine
    assert sorted(queues for queues, _, _ in composed) == sorted(QUEUES)


def test_the_gpu_worker_reserves_nvidia_gpus(services):
    devices = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert any(device.get("driver") == "nvidia" and "gpu" in device["capabilities"] for device in devices)
    assert "deploy" not in services["worker-cpu"]


def test_web_and_workers_share_database_broker_settings_and_data_volume(services):
    environments = [services[name]["environment"] for name in APP_SERVICES]
    assert all(environment == environments[0] for environment in environments)
    shared = environments[0]
    assert re.match(r"postgres://[^@]+@postgres:5432/", shared["DATABASE_URL"])
    assert shared["REDIS_URL"].startswith("redis://redis:6379/")
    assert shared["DJANGO_DEBUG"] == "0"
    assert "DJANGO_SECRET_KEY" in shared and "DJANGO_ALLOWED_HOSTS" in shared
    data_dir = shared["MARGINALIA_DATA_DIR"]
    for name in APP_SERVICES:
        assert any(volume.split(":")[1] == data_dir for volume in services[name]["volumes"]), name


def test_migrations_run_once_before_the_app_starts(services):
    assert command(services["migrate"]) == "python manage.py migrate --noinput"
    for name in APP_SERVICES:
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}


def test_each_service_builds_a_dockerfile_target_cpu_slim_and_gpu_cuda(services, dockerfile_stages):
    for name in ("web", "worker-cpu", "migrate", "worker-gpu"):
        assert services[name]["build"]["target"] in dockerfile_stages, name
    assert services["worker-gpu"]["build"]["target"] == "gpu"
    assert services["web"]["build"]["target"] == "cpu"
    assert dockerfile_stages["cpu"] == "python:3.11-slim"
    assert dockerfile_stages["gpu"].startswith("nvidia/cuda:")


def test_the_images_install_the_pinned_torch_from_the_right_wheel_index():
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    pinned = re.search(r"^torch==(\S+)$", (PROJECT_ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert re.search(rf"^ARG TORCH_VERSION={re.escape(pinned)}$", dockerfile, re.M)
    assert re.search(r"^ARG TORCH_CUDA_INDEX=https://download\.pytorch\.org/whl/cu\d+$", dockerfile, re.M)
    assert re.search(r"^ARG TORCH_CPU_INDEX=https://download\.pytorch\.org/whl/cpu$", dockerfile, re.M)


def test_local_state_stays_out_of_the_build_context():
    ignored = (PROJECT_ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "db.sqlite3"} <= set(ignored)


def test_one_beat_sends_the_periodic_stale_job_sweep_with_the_shared_settings(services):
    """Without beat, a job whose worker died would stay running until someone happened to look."""
    words = command(services["beat"]).split()
    assert words[:4] == ["celery", "-A", "marginalia", "beat"]
    assert words[words.index("--schedule") + 1].startswith(services["beat"]["environment"]["MARGINALIA_DATA_DIR"])
    assert services["beat"]["environment"] == services["web"]["environment"]
    assert [name for name, service in services.items() if "command" in service and " beat" in command(service)] == [
        "beat"
    ]
