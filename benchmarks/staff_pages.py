#!/usr/bin/env python
"""Every page and API route a staff member opens, timed on a large study.

Builds a proxy study of --items items x 3 judgments straight into the tables
(`tests.factories.make_bulk_proxy_study`, as paper_scale does; its run's metrics are stored as a
finished run's are), then asks every GET route of the URLconf whose path parameters are a
study, run, collection or item id, as a superuser through Django's test client, twice each.
Prints status, response size and the slower of the two wall times, marking routes slower than
--slow seconds. A route that fails (5xx, an exception) is what this is for: at 100K items the
study and adjudication pages once failed on SQLite with "Expression tree is too large".

First, the adjudication workspace: building its queue (once per change of the judgments: it
reads every counted judgment), then what an adjudicator waits for, the queue page and the
next-item step (deciding the item open and opening the next undecided one, median of 5), each
against the peer measured in the same run: the full disagreement list the adjudication page
read on every view before the queue was stored (`disagreement_items`).

Usage, from the project root (100K items take a few minutes to build on 2 cores):
    .venv/bin/python benchmarks/staff_pages.py [--items 100000] [--database-url URL] [--slow 1.0]
        [--adjudication-only]
With --database-url the database must exist and be empty (it is migrated); default: a SQLite
file in a temporary folder.
"""

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from paper_scale import setup_django  # noqa: E402

SKIPPED = ("admin/", "static", "logout", "<path", "token", "(?P")


def timed_get(client, path: str) -> tuple[str, int, float]:
    started = time.perf_counter()
    try:
        response = client.get(path)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        return str(response.status_code), len(body), time.perf_counter() - started
    except Exception as exc:  # a failing route is the finding: name it and go on
        return f"{type(exc).__name__}: {str(exc)[:60]}", 0, time.perf_counter() - started


def median_seconds(action, times: int = 5) -> float:
    seconds = []
    for _ in range(times):
        started = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - started)
    return sorted(seconds)[len(seconds) // 2]


def adjudication_figures(client, study) -> None:
    from annotation.services.adjudication import build_queue, next_undecided
    from annotation.services.quality import disagreement_items

    started = time.perf_counter()
    queue = build_queue(study)
    built = time.perf_counter() - started
    peer = median_seconds(lambda: disagreement_items(study), times=3)
    page = median_seconds(lambda: client.get(f"/studies/{study.pk}/adjudicate/").content)

    def step():
        item = next_undecided(study)
        decided = client.post(f"/studies/{study.pk}/adjudicate/{item}/", {"position": 0, "reason": "Annotator error"})
        assert decided.status_code == 302, decided.status_code
        assert client.get(decided.url).status_code == 200

    step()  # the first decision warms nothing the others would not
    next_step = median_seconds(step)
    print(
        f"adjudication queue: {queue.disputed:,} disputed items ordered in {built:.2f} s (once per change); "
        f"queue page {page:.3f} s, decide + next item {next_step:.3f} s (median of 5); "
        f"peer, the disagreement list read per view before: {peer:.2f} s "
        f"(page {page / peer:.2f} x, step {next_step / peer:.2f} x the peer)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--slow", type=float, default=1.0, help="mark routes slower than this many seconds")
    parser.add_argument("--adjudication-only", action="store_true", help="the adjudication figures, no route walk")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="staff-pages-"))
    try:
        setup_django(args.database_url, scratch)
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        from retrieval.metrics import evaluate_run
        from tests.factories import make_bulk_proxy_study
        from tests.routes import routes

        call_command("migrate", verbosity=0)
        settings.ALLOWED_HOSTS = ["*"]
        started = time.perf_counter()
        study = make_bulk_proxy_study(args.items)
        run = study.negatives_run
        run.metrics = evaluate_run(run)  # stored when a run finishes; the factory writes hits directly
        run.save(update_fields=["metrics"])
        print(f"study of {args.items:,} items x 3 judgments built in {time.perf_counter() - started:.1f} s")
        ids = {
            "study_id": study.pk,
            "run_id": run.pk,
            "collection_id": study.collection_id,
            "item_id": study.items.order_by("position").values_list("pk", flat=True).first(),
        }
        client = Client()
        client.force_login(get_user_model().objects.create(username="staff-pages", is_staff=True, is_superuser=True))
        adjudication_figures(client, study)
        if args.adjudication_only:
            return
        failures = 0
        for route in sorted({template for _, template in routes()}):
            names = re.findall(r"<(?:\w+:)?(\w+)>", route)
            if any(part in route for part in SKIPPED) or any(name not in ids for name in names):
                continue
            path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda match: str(ids[match.group(1)]), route)
            (status, size, first), (_, _, second) = timed_get(client, path), timed_get(client, path)
            seconds = max(first, second)
            failures += status[0] not in "234"
            mark = "  SLOW" if seconds > args.slow else ""
            print(f"{path:50s} {status:>5s} {size:>12,d} B {seconds:8.2f} s{mark}")
        print(f"{failures} routes failed")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
