#!/usr/bin/env python
"""Many annotators at once against the platform served by gunicorn: latency, capacity and whether
any judgment was lost, duplicated or over-assigned.

For each database (SQLite file, or a scratch Postgres database next to the one DATABASE_URL or
--postgres-url names) the benchmark migrates a scratch database once and seeds a proxy study
(--items items, 3 candidates, --judgments-per-item judgments each) and --annotators annotator
accounts with their own API token; then for each gunicorn worker count (--workers, e.g. 1,2,4)
and each mode, on a fresh copy of that seeded database, it starts `gunicorn marginalia.wsgi`
(DEBUG off, --conn-max-age) and drives every annotator over real HTTP for --seconds. With
--shared-server a worker count's one gunicorn serves the modes one after the other instead, each
mode on a study of its own that no request has touched (one study seeded per mode): a server
start, a database copy and a count per worker count rather than per run (trec_scale --tiny).

    GET /api/annotate/S/next/  ->  pause  ->  POST /api/annotate/S/submit/  ->  again

`realistic` pauses 2-5 s per item (a person reading); `flat` does not pause (capacity). With
--ramp S each annotator starts at a random moment of the first S seconds, as people arrive. A share
(--double-share) of the submissions go twice at the same moment, like a double click. Printed
per run: requests/s, the server's CPU time per request (gunicorn's processes, from /proc: a
measure the rest of the machine's load does not inflate much; Postgres's own CPU is not in it),
p50/p95/p99 of next and submit in ms, non-2xx answers by status, and what
the database holds afterwards: lost (submissions answered 200/201 with no judgment stored),
duplicated ((item, annotator) pairs judged more than once), over-assigned (items with more
judgments than asked), double-accepted (a double submit both answered "created").

Usage, from the project root (each run takes about --seconds plus a few to start gunicorn and count;
migrating and seeding, once per database, ~10-30 s on 2 cores):
    .venv/bin/python benchmarks/annotator_load.py --database sqlite --mode realistic
    .venv/bin/python benchmarks/annotator_load.py --database postgres --mode flat \\
        --postgres-url postgres://marginalia:marginalia-ci@127.0.0.1:5432/marginalia_i11a
    --code DIR runs the server from another checkout of the project (e.g. the code before a change,
    unpacked with `git archive REV | tar -x -C DIR`), with this same load generator; --json prints
    one JSON object per run as the last lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(Path(__file__).resolve())  # its seed and count subcommands run in the server's code base
PASSWORD = "load-test-password"
CANDIDATES = 3


# --- inside the server's code base: seeding and counting (run as subprocesses) ----------------------


def _django(code: Path):
    sys.path.insert(0, str(code))
    os.chdir(code)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")
    import django

    django.setup()


def seed(code: Path, items: int, annotators: int, judgments_per_item: int, studies: int) -> dict:
    """`studies` proxy studies of `items` items, each over a synthetic book of its own, and
    annotators with tokens: {"studies": [their ids], "tokens": [...]}. Built with bulk inserts
    (seconds, not minutes); each study is what create_study would store."""
    _django(code)
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from rest_framework.authtoken.models import Token

    from annotation.models import AnnotatorProfile

    with transaction.atomic():
        study_ids = [seed_study(number, items, judgments_per_item) for number in range(studies)]
        get_user_model().objects.bulk_create(
            get_user_model()(username=f"load{n:03d}", is_active=True) for n in range(annotators)
        )
        users = list(get_user_model().objects.filter(username__startswith="load").order_by("username"))
        AnnotatorProfile.objects.bulk_create(AnnotatorProfile(user=user) for user in users)
        tokens = [Token.objects.create(user=user).key for user in users]
    return {"studies": study_ids, "tokens": tokens}


def seed_study(number: int, items: int, judgments_per_item: int) -> int:
    """The seed's study `number`, over a collection and book of its own; returns its id."""
    from annotation.models import Item, ItemCandidate, Study
    from retrieval.models import Collection, Document, Passage, Query

    rng = random.Random(1 + number)
    collection = Collection.objects.create(name=f"load-{number}", kind=Collection.Kind.RELIC)
    book = Document.objects.create(collection=collection, external_id="book", title="Load")
    passages = Passage.objects.bulk_create(
        Passage(
            collection=collection,
            document=book,
            external_id=f"book:{n}:1",
            text=f"Sentence {n} of the load-test book, long enough to read like a sentence of prose.",
            start=n,
            length=1,
            ordinal=n,
        )
        for n in range(items * CANDIDATES)
    )
    queries = Query.objects.bulk_create(
        Query(
            collection=collection,
            external_id=f"q{n}",
            document=book,
            quote_length=1,
            left_context=[f"Critic {n} writes before the quotation."] * 4,
            right_context=[f"Critic {n} writes after the quotation."] * 4,
            ordinal=n,
        )
        for n in range(items)
    )
    study = Study.objects.create(
        name=f"load study {number}",
        kind=Study.Kind.PROXY,
        collection=collection,
        candidates_per_item=CANDIDATES,
        judgments_per_item=judgments_per_item,
        guidelines="Choose the sentence the critic quoted.",
    )
    study_items = Item.objects.bulk_create(
        Item(study=study, query=query, position=n) for n, query in enumerate(queries)
    )
    candidates = []
    for n, item in enumerate(study_items):
        gold = rng.randrange(CANDIDATES)
        for position in range(CANDIDATES):
            passage = passages[n * CANDIDATES + position]
            candidates.append(ItemCandidate(item=item, passage=passage, position=position, is_gold=position == gold))
    ItemCandidate.objects.bulk_create(candidates)
    return study.pk


def count(code: Path, accepted_file: Path) -> dict:
    """What the database holds after a server's runs, against the submissions it accepted:
    {study id: counts} for the {study id: [(item, username)]} of `accepted_file`."""
    _django(code)
    from django.db.models import Count

    from annotation.models import Judgment, Study

    counts = {}
    for study_id, pairs in json.loads(accepted_file.read_text()).items():
        accepted = {tuple(pair) for pair in pairs}
        judgments = Judgment.objects.filter(item__study_id=int(study_id))
        stored = set(judgments.values_list("item_id", "annotator__username"))
        duplicated = judgments.values("item_id", "annotator_id").annotate(n=Count("id")).filter(n__gt=1).count()
        per_item = judgments.values("item_id").annotate(n=Count("id"))
        limit = Study.objects.get(pk=int(study_id)).judgments_per_item
        counts[study_id] = {
            "judgments": judgments.count(),
            "accepted": len(accepted),
            "lost": len(accepted - stored),
            "duplicated": duplicated,
            "over_assigned": sum(1 for row in per_item if row["n"] > limit),
        }
    return counts


# --- the load generator ---------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"next": [], "submit": []})
    statuses: Counter = field(default_factory=Counter)
    accepted: set = field(default_factory=set)
    double_accepted: int = 0
    double_submits: int = 0
    transport_errors: Counter = field(default_factory=Counter)

    def record(self, kind: str, seconds: float, status: int) -> None:
        self.latencies[kind].append(seconds)
        self.statuses[(kind, status)] += 1


async def annotator(client, study: int, username: str, deadline: float, args, rng: random.Random, tally: Tally):
    import httpx

    await asyncio.sleep(rng.uniform(0.0, args.ramp))  # people do not all start in the same second
    while time.perf_counter() < deadline:
        try:
            started = time.perf_counter()
            response = await client.get(f"/api/annotate/{study}/next/")
            tally.record("next", time.perf_counter() - started, response.status_code)
            if response.status_code != 200:
                await asyncio.sleep(0.5)
                continue
            payload = response.json()
            if payload["finished"]:
                return
            if args.mode == "realistic":
                # Reading the item; one still reading at the deadline leaves without submitting.
                await asyncio.sleep(min(rng.uniform(2.0, 5.0), max(0.0, deadline - time.perf_counter())))
                if time.perf_counter() >= deadline:
                    return
            body = {"item": payload["item"], "position": rng.randrange(len(payload["candidates"])), "seconds": 3}
            copies = 2 if rng.random() < args.double_share else 1
            results = await asyncio.gather(*(submit(client, study, body, tally) for _ in range(copies)))
            created = [result for result in results if result is not None]
            if copies == 2:
                tally.double_submits += 1
                tally.double_accepted += sum(created) > 1
            if created:
                tally.accepted.add((payload["item"], username))
        except httpx.HTTPError as exc:
            tally.transport_errors[type(exc).__name__] += 1
            await asyncio.sleep(0.5)


async def submit(client, study: int, body: dict, tally: Tally) -> bool | None:
    """POST one answer; True/False: accepted (created or already stored), None: refused."""
    started = time.perf_counter()
    response = await client.post(f"/api/annotate/{study}/submit/", json=body)
    tally.record("submit", time.perf_counter() - started, response.status_code)
    if response.status_code in (200, 201):
        return bool(response.json().get("created"))
    return None


def server_cpu_seconds(master_pid: int) -> float:
    """CPU time (user + system) used so far by gunicorn's master and its workers: what the
    requests cost the server, whatever else the machine is busy with."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == master_pid or int(fields[1]) == master_pid:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def drive(base_url: str, study: int, tokens: list[str], args, server_pid: int) -> tuple[Tally, float, float]:
    import httpx

    tally = Tally()
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    clients = [
        httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Token {token}"}, timeout=60.0, limits=limits)
        for token in tokens
    ]
    try:
        # Warm-up, not measured: every annotator's first item (each gunicorn worker loads the app
        # and opens its database connection on its first requests).
        await asyncio.gather(*(client.get(f"/api/annotate/{study}/next/") for client in clients))
        started, cpu_before = time.perf_counter(), server_cpu_seconds(server_pid)
        deadline = started + args.seconds
        await asyncio.gather(
            *(
                annotator(client, study, f"load{n:03d}", deadline, args, random.Random(n), tally)
                for n, client in enumerate(clients)
            )
        )
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))
    return tally, time.perf_counter() - started, server_cpu_seconds(server_pid) - cpu_before


# --- one run: database, server, load, counts ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ScratchDatabase:
    """A fresh database `name`: an SQLite file in `folder`, or a Postgres database created next to
    the one `postgres_url` names; dropped afterwards. With `template_url` (a database of the same
    kind no process is connected to) it starts as a copy of that one: a run gets the migrated,
    seeded study from a file copy or a `CREATE DATABASE ... TEMPLATE` instead of migrating again
    (the migrations alone cost 7-11 s of CPU, a minute of waiting on the loaded 2-core machine)."""

    def __init__(self, kind: str, postgres_url: str | None, folder: Path, name: str, template_url: str | None = None):
        self.kind, self.template_url = kind, template_url
        if kind == "sqlite":
            self.path = folder / f"{name}.sqlite3"
            self.url = f"sqlite:///{self.path}"
            return
        if not postgres_url:
            raise SystemExit("annotator_load: --postgres-url (or DATABASE_URL=postgres://...) is required for Postgres")
        parsed = urlparse(postgres_url)
        self.admin_url = postgres_url
        self.name = f"{parsed.path.lstrip('/')}_{name}_{os.getpid()}"
        self.url = urlunparse(parsed._replace(path=f"/{self.name}"))

    def __enter__(self):
        if self.kind == "postgres":
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}"')
            template = f' TEMPLATE "{urlparse(self.template_url).path.lstrip("/")}"' if self.template_url else ""
            self._admin(f'CREATE DATABASE "{self.name}"{template}')
        elif self.template_url:
            # The backup API copies a consistent database, whatever its WAL file still holds.
            with (
                contextlib.closing(sqlite3.connect(self.template_url.removeprefix("sqlite:///"))) as source,
                contextlib.closing(sqlite3.connect(self.path)) as target,
            ):
                source.backup(target)
        return self

    def __exit__(self, *exc):
        if self.kind == "postgres":
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as connection:
            connection.execute(statement)


def server_environment(database_url: str, args) -> dict:
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "DATABASE_CONN_MAX_AGE": str(args.conn_max_age),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "annotator-load-benchmark",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(args.code),
    }


def in_code(args, env: dict, *command: str) -> str:
    """Run this script's own subcommand (seed, count) or manage.py in the server's code base."""
    result = subprocess.run(
        [sys.executable, *command], cwd=args.code, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"annotator_load: {' '.join(command[:2])} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def start_server(env: dict, port: int, args, log: Path) -> subprocess.Popen:
    """gunicorn serving the platform; its own log (Django's warnings for 4xx answers) goes to `log`."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "marginalia.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(args.workers),
            "--chdir",
            str(args.code),
            "--log-level",
            "warning",
            "--timeout",
            "120",
        ],
        cwd=args.code,
        env=env,
        start_new_session=True,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    import httpx

    for _ in range(300):
        if server.poll() is not None:
            raise SystemExit("annotator_load: gunicorn exited before it answered")
        try:
            # Any answer but a server error: the app is loaded (anonymous callers get 401/403 here).
            if httpx.get(f"http://127.0.0.1:{port}/api/jobs/", timeout=2).status_code < 500:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop_server(server)
    raise SystemExit("annotator_load: gunicorn did not answer within 60 s")


def stop_server(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


@contextlib.contextmanager
def seeded_template(database: str, args, folder: Path, studies: int):
    """(the database every server of `database` copies, the seed's studies and tokens): migrated
    once (or copied from --migrated-database), `studies` studies and the annotators seeded once
    (the same tokens in every copy)."""
    with ScratchDatabase(database, args.postgres_url, folder, "seeded", args.migrated_database) as template:
        env = server_environment(template.url, args)
        if not args.migrated_database:
            # Without migrate's system checks (the URLconf's, 1.5-2 s of CPU): they check the code, not
            # the scratch database, and `manage.py check` and the test suite run them.
            in_code(args, env, "manage.py", "migrate", "--no-input", "-v0", "--skip-checks")
        seed_arguments = (str(args.code), str(args.items), str(args.annotators), str(args.judgments_per_item))
        seeded = in_code(args, env, SCRIPT, "seed", *seed_arguments, str(studies))
        yield template, json.loads(seeded.strip().splitlines()[-1])


def served_runs(template: ScratchDatabase, seeded: dict, modes: list[str], workers: int, args, folder: Path):
    """The load runs of `modes`, one after the other, the n-th on the seed's n-th study, all served
    by one gunicorn with `workers` on one fresh copy of the seeded template; their results."""
    tallies = []
    with ScratchDatabase(template.kind, args.postgres_url, folder, "run", template.url) as scratch:
        env = server_environment(scratch.url, args)
        port = free_port()
        log = folder / "server.log"
        server = start_server(env, port, argparse.Namespace(**{**vars(args), "workers": workers}), log)
        try:
            for mode, study in zip(modes, seeded["studies"], strict=True):
                run_args = argparse.Namespace(**{**vars(args), "mode": mode, "workers": workers})
                load = drive(f"http://127.0.0.1:{port}", study, seeded["tokens"], run_args, server.pid)
                tallies.append((mode, study, *asyncio.run(load)))
        finally:
            stop_server(server)
        accepted_file = folder / "accepted.json"
        accepted_file.write_text(json.dumps({study: sorted(tally.accepted) for _, study, tally, _, _ in tallies}))
        counts = json.loads(in_code(args, env, SCRIPT, "count", str(args.code), str(accepted_file)).splitlines()[-1])
        server_errors = [line for line in log.read_text(errors="replace").splitlines() if "Error" in line]
        if server_errors:
            print(f"server log ({len(server_errors)} error lines), last ones:", *server_errors[-5:], sep="\n  ")
    return [
        figures(template.kind, mode, workers, tally, elapsed, server_cpu, args) | counts[str(study)]
        for mode, study, tally, elapsed, server_cpu in tallies
    ]


def figures(database: str, mode: str, workers: int, tally: Tally, elapsed: float, server_cpu: float, args) -> dict:
    requests = sum(tally.statuses.values())
    return {
        "database": database,
        "mode": mode,
        "annotators": args.annotators,
        "workers": workers,
        "seconds": round(elapsed, 1),
        "requests": requests,
        "requests_per_second": round(requests / elapsed, 1),
        "server_cpu_ms_per_request": round(1000 * server_cpu / max(1, requests), 1),
        **{
            f"{kind}_p{int(share * 100)}_ms": round(1000 * percentile(tally.latencies[kind], share), 1)
            for kind in ("next", "submit")
            for share in (0.5, 0.95, 0.99)
        },
        "errors": {f"{kind} {status}": n for (kind, status), n in sorted(tally.statuses.items()) if status >= 300},
        "server_errors": sum(n for (_, status), n in tally.statuses.items() if status >= 500),
        "transport_errors": dict(tally.transport_errors),
        "double_submits": tally.double_submits,
        "double_accepted": tally.double_accepted,
    }


HEADER = (
    f"{'database':9} {'mode':9} {'req/s':>6} {'cpu ms/req':>10} {'next p50/p95/p99 ms':>22} "
    f"{'submit p50/p95/p99 ms':>22} {'judg.':>6} {'lost':>4} {'dup':>4} {'over':>4} {'5xx':>4}  errors"
)


def row(result: dict) -> str:
    def trio(kind):
        return "/".join(f"{result[f'{kind}_p{p}_ms']:.0f}" for p in (50, 95, 99))

    errors = ", ".join(f"{key}: {n}" for key, n in result["errors"].items()) or "none"
    if result["transport_errors"]:
        errors += f"; transport {result['transport_errors']}"
    return (
        f"{result['database']:9} {result['mode']:9} {result['requests_per_second']:6.1f} "
        f"{result['server_cpu_ms_per_request']:10.1f} {trio('next'):>22} "
        f"{trio('submit'):>22} {result['judgments']:6d} {result['lost']:4d} {result['duplicated']:4d} "
        f"{result['over_assigned']:4d} {result['server_errors']:4d}  {errors}"
    )


def main(argv=None) -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("seed", "count"):
        command, code, *rest = sys.argv[1:]
        if command == "seed":
            result = seed(Path(code), *(int(value) for value in rest))
        else:
            result = count(Path(code), Path(rest[0]))
        print(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=["sqlite", "postgres", "both"], default="sqlite")
    parser.add_argument("--mode", choices=["realistic", "flat", "both"], default="both")
    parser.add_argument("--postgres-url", default=os.environ.get("DATABASE_URL", "") or None)
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=40.0, help="Load per run (default 40).")
    parser.add_argument("--items", type=int, default=1200)
    parser.add_argument("--judgments-per-item", type=int, default=3)
    parser.add_argument("--double-share", type=float, default=0.1, help="Share of submissions sent twice at once.")
    parser.add_argument(
        "--workers",
        type=lambda text: [int(count) for count in text.split(",")],
        default=[4],
        help="gunicorn workers (default 4); several counts (1,2,4) run each on its own copy of the seeded study.",
    )
    parser.add_argument("--ramp", type=float, default=0.0, help="Annotators start spread over these seconds.")
    parser.add_argument("--conn-max-age", type=int, default=60, help="DATABASE_CONN_MAX_AGE for the server.")
    parser.add_argument(
        "--migrated-database",
        default=None,
        help="An empty database the --code checkout migrated, of the one --database kind (sqlite:///FILE, or a"
        " Postgres URL on --postgres-url's server): copied instead of migrating one; never written.",
    )
    parser.add_argument(
        "--shared-server",
        action="store_true",
        help="One gunicorn per worker count serves the modes one after the other, each on a study of its own"
        " (seconds cheaper: one server start, database copy and count per worker count, not per mode).",
    )
    parser.add_argument("--code", type=Path, default=ROOT, help="Project checkout the server runs from.")
    parser.add_argument("--json", action="store_true", help="Also print one JSON object per run.")
    args = parser.parse_args(argv)
    if args.postgres_url and not args.postgres_url.startswith("postgres"):
        args.postgres_url = None
    args.code = args.code.resolve()
    migrated = args.migrated_database
    if migrated and (args.database == "both" or not migrated.startswith(args.database)):
        parser.error("--migrated-database: one database of the --database kind (sqlite or postgres)")
    if migrated and args.database == "sqlite" and not Path(migrated.removeprefix("sqlite:///")).is_file():
        parser.error(f"--migrated-database: no SQLite file {migrated.removeprefix('sqlite:///')}")
    databases = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    modes = ["realistic", "flat"] if args.mode == "both" else [args.mode]
    # A server per mode (each on its own copy of one seeded study), or one for all of them.
    servers = [modes] if args.shared_server else [[mode] for mode in modes]
    print(
        f"annotator load: {args.annotators} annotators, {args.items} items x {args.judgments_per_item} judgments, "
        f"{args.seconds:g} s per run (starts spread over {args.ramp:g} s), "
        f"gunicorn -w {','.join(map(str, args.workers))}, "
        f"CONN_MAX_AGE {args.conn_max_age}, "
        f"double submits {args.double_share:.0%}, code {args.code}, {os.cpu_count()} CPUs"
    )
    print(HEADER)
    results = []
    for database in databases:
        with (
            tempfile.TemporaryDirectory(prefix="annotator-load-") as folder,
            seeded_template(database, args, Path(folder), len(servers[0])) as (template, seeded),
        ):
            for workers in args.workers:
                for served in servers:
                    for result in served_runs(template, seeded, served, workers, args, Path(folder)):
                        results.append(result)
                        print(row(result), flush=True)
    if args.json:
        for result in results:
            print(json.dumps(result, sort_keys=True))
    broken = [r for r in results if r["lost"] or r["duplicated"] or r["over_assigned"] or r["server_errors"]]
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
