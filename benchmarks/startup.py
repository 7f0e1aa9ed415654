#!/usr/bin/env python
"""How long a management command takes to start, against a bare Django project in the same run.

Each command runs as its own process (`python manage.py ...`) --runs times; the least wall and
CPU (user + system) seconds are kept, since other processes may share the CPUs. The data
commands are asked for a study or run that does not exist, so they do all of their start (Django
set-up, their system checks, loading the command) and one query, and no work. The peer is a
project made by `django-admin startproject` (with the admin, auth, sessions and the rest of its
default apps) in a scratch folder: `check` and `help` there are the floor Django itself sets.
Prints each command's seconds and its ratio to the bare project's `check`.

Usage, from the project root:
    .venv/bin/python benchmarks/startup.py [--runs 7]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.migrated import copy_migrated_sqlite  # noqa: E402

OURS = (
    ("export_run", "999999"),
    ("export_study", "999999"),
    ("export_judgments", "999999"),
    ("import_judgments", "999999", "missing.jsonl"),
    ("help",),
    ("check",),
)
BARE = (("check",), ("help",))


def least_seconds(folder: Path, arguments: tuple[str, ...], runs: int, env: dict) -> tuple[float, float]:
    """(least wall, least CPU) seconds of `python manage.py ARGUMENTS` in `folder`."""
    walls, cpus = [], []
    for _ in range(runs):
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "manage.py", *arguments],
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _, _, usage = os.wait4(process.pid, 0)
        walls.append(time.perf_counter() - started)
        cpus.append(usage.ru_utime + usage.ru_stime)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="startup-") as scratch:
        scratch = Path(scratch)
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{scratch / 'db.sqlite3'}",
            "MARGINALIA_DATA_DIR": str(scratch / "data"),
            "DJANGO_SETTINGS_MODULE": "marginalia.settings",
        }
        copy_migrated_sqlite(scratch / "db.sqlite3")
        bare = scratch / "bare"
        bare.mkdir()
        subprocess.run(
            [sys.executable, "-m", "django", "startproject", "bare", str(bare)],
            check=True,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": ""},
        )
        bare_env = {key: value for key, value in env.items() if key != "DJANGO_SETTINGS_MODULE"}

        floor = {arguments: least_seconds(bare, arguments, args.runs, bare_env) for arguments in BARE}
        reference = floor["check",][1]
        print(f"least of {args.runs} runs, seconds; ratio = CPU / a bare Django project's `check` CPU")
        print(f"{'command':<42} {'wall':>6} {'CPU':>6} {'ratio':>6}")
        for arguments in OURS:
            wall, cpu = least_seconds(ROOT, arguments, args.runs, env)
            print(f"{' '.join(arguments):<42} {wall:6.2f} {cpu:6.2f} {cpu / reference:6.2f}")
        for arguments, (wall, cpu) in floor.items():
            print(f"{'bare Django project: ' + ' '.join(arguments):<42} {wall:6.2f} {cpu:6.2f} {cpu / reference:6.2f}")


if __name__ == "__main__":
    main()
