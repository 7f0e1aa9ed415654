"""An empty, migrated SQLite database, built once per set of migrations and copied after.

`manage.py migrate` on an empty SQLite file takes about 10 s of CPU on two cores: Django
re-renders the model states of some 70 migrations. Every benchmark's scratch database and every
live-platform test module needed one, so a test run spent minutes building the same empty
database. The first caller builds it into the system's temporary folder under a fingerprint of
everything that decides its contents; later callers, in any process, copy the file.

What decides the contents: this project's migration files (their paths and bytes) and the pinned
requirements (Django's and every third-party app's migrations come with their versions). On an
empty database no migration reads a setting and their data steps find no rows (the one row
written, the embedded judge, is spelled out in its migration), so one copy serves every
environment and no change outside the migrations can make it stale.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(tempfile.gettempdir()) / "marginalia-migrated"


def migrations_fingerprint() -> str:
    digest = hashlib.sha256()
    sources = sorted(ROOT.glob("*/migrations/*.py")) + sorted(ROOT.glob("requirements*.txt"))
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:24]


def migrated_template() -> Path:
    """The cached migrated database, built by `manage.py migrate` when missing. Built under a
    unique name and renamed into place, so a concurrent caller never copies half a file."""
    template = CACHE / f"{migrations_fingerprint()}.sqlite3"
    if template.is_file():
        return template
    building = CACHE / f"building-{uuid.uuid4().hex}"
    building.mkdir(parents=True)
    try:
        database = building / "db.sqlite3"
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{database}",
            "MARGINALIA_DATA_DIR": str(building / "data"),
            "DJANGO_SETTINGS_MODULE": "marginalia.settings",
            "HF_HUB_OFFLINE": "1",
        }
        # The system checks look at the code, not the database being built.
        command = [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0", "--skip-checks"]
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        os.replace(database, template)  # migrate closed its last connection: no WAL file is left
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return template


def copy_migrated_sqlite(database: Path) -> None:
    """A fully migrated, empty SQLite database at `database` (its folder is created)."""
    database.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_template(), database)
