#!/usr/bin/env python
"""How much faster a BM25 run gets when 1, 2 or 4 worker processes share its shards.

Builds a RELiC-like collection from the Gutenberg books (benchmarks/relic_like.py: each book's
sentences, every window of 1-5 sentences as candidates, masked quotations with 4 sentences of
context on either side), imports it into a scratch database, starts a private Redis, and for
each worker count starts that many Celery workers (one task at a time each, as separate
processes) and queues the same BM25 run (`retrieve --async`) split into the same shards. The
time is from queueing to the run's job succeeding (what a user waits), read from the database.
The peer measured in the same run is the run done in one piece in one process (`retrieve`
without --async); every sharded run is checked hit for hit and score for score against it.

Usage, from the project root (the default takes a few minutes on 2 cores):
    .venv/bin/python benchmarks/sharded_runs.py [--books 6] [--queries-per-book 400] [--shards 8]
        [--workers 1,2,4] [--database-url postgres://...] [--large]
--large: 24 books x 1,000 queries (24,000 queries, ~30 minutes on 2 cores).
With --database-url the database must exist and be empty (it is migrated); default: a SQLite
file in a temporary folder.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.stdout.reconfigure(line_buffering=True)  # each row as soon as it is measured
sys.path.insert(0, str(ROOT))

from benchmarks.migrated import copy_migrated_sqlite  # noqa: E402
from benchmarks.relic_like import write_relic_like  # noqa: E402

MANAGE = [sys.executable, str(ROOT / "manage.py")]
JOB_TIMEOUT_SECONDS = 3 * 3600


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--books", type=int, default=6)
    parser.add_argument("--queries-per-book", type=int, default=400)
    parser.add_argument("--shards", type=int, default=8, help="Shards per run, the same for every worker count.")
    parser.add_argument("--workers", default="1,2,4", help="Worker counts to measure (comma-separated).")
    parser.add_argument("--database-url", default="", help="An empty database to use instead of a SQLite file.")
    parser.add_argument("--large", action="store_true", help="24 books x 1,000 queries.")
    arguments = parser.parse_args()
    if arguments.large:
        arguments.books, arguments.queries_per_book = 24, 1000
    return arguments


def manage(env: dict, *args) -> str:
    result = subprocess.run([*MANAGE, *map(str, args)], env=env, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"manage.py {args[0]} failed: {result.stderr.strip()[-2000:]}")
    return result.stdout


def last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def run_fingerprint(run_id: int) -> tuple[int, str]:
    """(hits, sha256 of every hit's query, passage, rank and exact score in order)."""
    from retrieval.models import Hit

    digest = hashlib.sha256()
    count = 0
    for row in (
        Hit.objects.filter(run_id=run_id)
        .order_by("query_id", "rank")
        .values_list("query_id", "passage_id", "rank", "score")
        .iterator(chunk_size=20000)
    ):
        digest.update(repr(row).encode())
        count += 1
    return count, digest.hexdigest()


def wait_for_job(job_id: int) -> str:
    from jobs.models import Job

    deadline = time.monotonic() + JOB_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.is_finished:
            return job.status if job.status == "succeeded" else f"{job.status}: {job.error[:500]}"
        time.sleep(0.2)
    return "timed out"


def start_workers(env: dict, count: int, log_folder: Path) -> list[subprocess.Popen]:
    from jobs.management.commands.run_platform import worker_command

    return [
        subprocess.Popen(
            [*worker_command("cpu,gpu"), "--hostname", f"bench-{count}-{number}@%h", "--loglevel", "WARNING"],
            env=env,
            cwd=ROOT,
            stdout=(log_folder / f"worker-{count}-{number}.log").open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for number in range(count)
    ]


def wait_until_workers_answer(redis_url: str, count: int) -> None:
    from celery import Celery

    client = Celery(broker=redis_url)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        # limit: back as soon as every worker has answered, not after the whole second.
        replies = client.control.ping(timeout=1.0, limit=count) or []
        if len(replies) >= count:
            return
    raise SystemExit(f"only {len(replies)} of {count} workers answered")


@contextlib.contextmanager
def scratch_platform(database_url: str, shards: int, prefix: str):
    """A scratch folder, its database (`database_url`, or an SQLite file there) migrated and set
    up for this process, a private Redis, and the environment `manage.py` calls and workers get:
    (folder, env, redis_url, database_url). A SIGTERM (a timeout) unwinds like Ctrl-C, so the
    workers and Redis started are stopped; the folder is removed at the end."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    scratch_sqlite = not database_url
    if scratch_sqlite:
        copy_migrated_sqlite(folder / "db.sqlite3")
        database_url = f"sqlite:///{folder / 'db.sqlite3'}"
    os.environ.update(DATABASE_URL=database_url, DJANGO_SETTINGS_MODULE="marginalia.settings")
    import django

    django.setup()  # this process only reads the database; manage.py and workers do the work
    from jobs.management.commands.run_platform import broker_environment, free_port, start_redis, stop_process

    redis_process, redis_url = start_redis(free_port())
    env = {
        **os.environ,
        "MARGINALIA_DATA_DIR": str(folder / "data"),
        "MARGINALIA_RUN_SHARDS": str(shards),
        "HF_HUB_OFFLINE": "1",
        **broker_environment(redis_url),
    }
    try:
        if not scratch_sqlite:
            # Without migrate's system checks (the URLconf's, 1.5-2 s of CPU on 2 cores): the workers
            # this benchmark starts run every check at their start, and nothing timed waits for this one.
            manage(env, "migrate", "--noinput", "-v", "0", "--skip-checks")
        yield folder, env, redis_url, database_url
    finally:
        stop_process(redis_process)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    arguments = parse_arguments()
    with scratch_platform(arguments.database_url, arguments.shards, "marginalia-sharded-") as platform:
        folder, env, redis_url, database_url = platform
        from jobs.management.commands.run_platform import stop_process

        started = time.perf_counter()
        relic = write_relic_like(
            folder / "relic.json",
            arguments.data / "gutenberg",
            books=arguments.books,
            queries_per_book=arguments.queries_per_book,
        )
        imported = last_json(manage(env, "import_relic", relic, "--collection", "bench", "--json"))
        print(
            f"collection: {imported['books']} books, {imported['queries']} queries, {imported['sentences']} sentences"
            f" (import {time.perf_counter() - started:.1f} s, {database_url.split(':')[0]})"
        )
        # Timed like the sharded runs: from starting the command to the run being stored.
        command_started = time.perf_counter()
        one_piece = last_json(manage(env, "retrieve", "--collection", "bench", "--retriever", "bm25", "--json"))
        one_piece_seconds = time.perf_counter() - command_started
        reference = run_fingerprint(one_piece["run_id"])
        print(
            f"one piece, one process: {one_piece_seconds:.2f} s ({one_piece['seconds']:.2f} s in the run itself),"
            f" {reference[0]} hits"
        )
        print()
        print(
            f"{'workers':>7} {'shards':>6} {'seconds':>8} {'vs 1 worker':>11} {'per worker':>10}"
            f" {'vs one piece':>12}  same hits"
        )
        one_worker = None
        for count in [int(value) for value in arguments.workers.split(",")]:
            workers = start_workers(env, count, folder)
            try:
                wait_until_workers_answer(redis_url, count)
                queued_at = time.perf_counter()
                queued = last_json(
                    manage(env, "retrieve", "--collection", "bench", "--retriever", "bm25", "--async", "--json")
                )
                outcome = wait_for_job(queued["job_id"])
                seconds = time.perf_counter() - queued_at
            finally:
                for worker in workers:
                    stop_process(worker)
            if outcome != "succeeded":
                raise SystemExit(f"{count} workers: the run's job {outcome}")
            one_worker = one_worker or seconds
            speed_up = one_worker / seconds
            same = run_fingerprint(queued["run_id"]) == reference
            print(
                f"{count:>7} {arguments.shards:>6} {seconds:>8.2f} {speed_up:>10.2f}x {speed_up / count:>9.2f}x"
                f" {one_piece_seconds / seconds:>11.2f}x  {'yes' if same else 'NO'}"
            )
    print(f"\n{os.cpu_count()} CPU cores on this machine; workers beyond the free cores cannot speed a run up.")


if __name__ == "__main__":
    main()
