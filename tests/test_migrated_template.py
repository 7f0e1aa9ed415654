"""benchmarks/migrated.py: the live-platform tests and the benchmarks copy one migrated SQLite
database instead of migrating their own. A copy is a database `migrate` has nothing left to do on,
and the cached file is found again only while the migrations and the pins it was built from are
unchanged."""

import subprocess
import sys

from benchmarks import migrated
from tests.live_platform import PROJECT_ROOT


def test_a_copy_has_every_migration_applied_and_is_a_file_of_its_own(tmp_path):
    first, second = tmp_path / "a" / "db.sqlite3", tmp_path / "b" / "db.sqlite3"
    migrated.copy_migrated_sqlite(first)
    migrated.copy_migrated_sqlite(second)

    check = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--check", "--skip-checks"],
        cwd=PROJECT_ROOT,
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{first}", "MARGINALIA_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr  # --check exits 1 on any unapplied migration
    assert first.read_bytes() == second.read_bytes() and not first.samefile(second)


def test_the_fingerprint_changes_with_a_migration_file_or_a_pin(tmp_path, monkeypatch):
    (tmp_path / "app" / "migrations").mkdir(parents=True)
    migration = tmp_path / "app" / "migrations" / "0001_initial.py"
    migration.write_text("operations = []\n")
    pins = tmp_path / "requirements.txt"
    pins.write_text("Django==5.2.19\n")
    monkeypatch.setattr(migrated, "ROOT", tmp_path)

    seen = [migrated.migrations_fingerprint()]
    migration.write_text("operations = ['changed']\n")
    seen.append(migrated.migrations_fingerprint())
    pins.write_text("Django==5.2.20\n")
    seen.append(migrated.migrations_fingerprint())
    (tmp_path / "app" / "migrations" / "0002_more.py").write_text("operations = []\n")
    seen.append(migrated.migrations_fingerprint())

    assert len(set(seen)) == 4
    assert migrated.migrations_fingerprint() == seen[-1]  # the same files, the same cached database
