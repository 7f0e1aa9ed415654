#!/usr/bin/env python
"""Every page and API route a staff member opens, timed on a large study.

Builds a proxy study of --items items x 3 judgments straight into the tables
(`tests.factories.make_bulk_proxy_study`, as paper_scale does; its run's metrics are stored as a
finished run's are), then asks every GET route of the URLconf whose path parameters are a
study, run, collection or item id, as a superuser through Django's test client, twice each.
Prints status, response size and the slower of the two requests' wall and CPU seconds, marking
routes slower than --slow seconds (wall). A route that fails (5xx, an exception) is what this is for: at 100K items the
study and adjudication pages once failed on SQLite with "Expression tree is too large". A private
Redis serves as the task queue, as in a deployment, so a large study's report is queued as a job
(nothing consumes it here); without one the report page answers a clear 503.

First, the adjudication workspace: building its queue afresh (it reads every counted judgment;
only a new seed or new exclusions need it), then what an adjudicator waits for, the queue page
and the next-item step (deciding the item open and opening the next undecided one, median of 5),
each against the peer measured in the same run: the full disagreement list the adjudication page
read on every view before the queue was stored (`disagreement_items`). Then the study as
annotators keep judging it: the queue page, the next-item step and an item's page, each the first
view right after one new judgment and right after one void (the queue follows the change then),
beside the same page warm; and the study and quality pages warm and after a judgment, with what
the quality page's measures and its refresh of the automatic flags cost apart (least of
--repeats each).

The data manager's tables are then asked again with each filter, sort, search and a deep page
(DATA_MANAGER_QUERIES), since those are where a 100K-item table costs: its pages are meant to
answer within 0.5 s at 100K items. Its run has a per-query result row and a qrel per query, as a
finished run on a collection with qrels has, so the run's query table has 100K rows too.

Usage, from the project root (100K items take a few minutes to build on 2 cores):
    .venv/bin/python benchmarks/staff_pages.py [--items 100000] [--database-url URL] [--slow 1.0]
        [--adjudication-only] [--repeats 3] [--reuse]
With --database-url the database must exist and be empty (it is migrated), or, with --reuse,
hold the study an earlier run built there (what that run and this one changed in it stays: a few
judgments, voids and decisions); default: a SQLite file in a temporary folder.
"""

import argparse
import os
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
# The data manager's tables with each filter, sort and search, and a page deep in the table
# (route name -> query strings). A filter on an annotator names the first bulk annotator.
DATA_MANAGER_QUERIES = {
    "data_study_items": [
        "status=partial",
        "status=complete",
        "agreement=unanimous",
        "agreement=split",
        "agreement=none",
        "flagged=yes",
        "adjudicated=no",
        "annotator={annotator}",
        "judge=bulk-judge",
        "role=gold",
        "search=q99999",
        "search=query 4242",
        "sort=-judgments",
        "sort=-answered",
        "agreement=split&sort=-answered&per_page=200",
        "page=1000",
    ],
    "api-data-study-items": ["agreement=none", "status=complete&annotator={annotator}", "page=1500&per_page=50"],
    "data_run_queries": [
        "relevant=yes",
        "max_rank=1",
        "min_rank=2&sort=-rank",
        "judged=yes",
        "search=q12345",
        "page=1000",
    ],
    "api-data-run-queries": ["sort=rank&page=900"],
    "data_collection_queries": ["qrels=yes", "studied=yes", "pooled=no", "search=query 777", "sort=-id", "page=1000"],
    "api-data-collection-queries": ["relevant=no&page=3"],
}


def timed_get(client, path: str) -> tuple[str, int, float, float]:
    """Status, body size, wall and CPU seconds (on a shared machine the CPU time is what the
    page itself cost; the wall time adds waiting for a core)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        response = client.get(path)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        status, size = str(response.status_code), len(body)
    except Exception as exc:  # a failing route is the finding: name it and go on
        status, size = f"{type(exc).__name__}: {str(exc)[:60]}", 0
    return status, size, time.perf_counter() - started, time.process_time() - cpu_started


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
        f"adjudication queue: {queue.disputed:,} disputed items ordered in {built:.2f} s (a full build); "
        f"queue page {page:.3f} s, decide + next item {next_step:.3f} s (median of 5); "
        f"peer, the disagreement list read per view before: {peer:.2f} s "
        f"(page {page / peer:.2f} x, step {next_step / peer:.2f} x the peer)"
    )


LIVE_ANNOTATOR = "staff-pages-live-"


class LiveStudy:
    """The study as annotators keep judging it: one more judgment (a fresh annotator claims the
    neediest item and answers it through the annotation services, as the annotation page does)
    or one more void (staff void a counted judgment, as the study page does), one at a time."""

    def __init__(self, study, staff):
        from django.contrib.auth import get_user_model

        from annotation.models import Study

        Study.objects.filter(pk=study.pk).update(judgments_per_item=study.judgments_per_item + 1)
        study.refresh_from_db()
        self.study, self.staff = study, staff
        self.count = get_user_model().objects.filter(username__startswith=LIVE_ANNOTATOR).count()  # earlier runs'

    def judge(self) -> int:
        """One new judgment; the judged item's id."""
        from django.contrib.auth import get_user_model

        from annotation.services import claim_next_item, submit_judgment

        self.count += 1
        annotator = get_user_model().objects.create(username=f"{LIVE_ANNOTATOR}{self.count}")
        assignment = claim_next_item(self.study, annotator)
        submit_judgment(annotator=annotator, item=assignment.item, position=self.count % 3)
        return assignment.item_id

    def void(self) -> int:
        """One counted judgment voided; its item's id."""
        from annotation.selectors import counted_judgments_by_copies
        from annotation.services.queue import void_judgment

        judgment = counted_judgments_by_copies(self.study).order_by("pk").first()
        void_judgment(judgment, by=self.staff, reason="staff-pages benchmark")
        return judgment.item_id


def live_figures(client, study, staff, repeats: int) -> None:
    """Each adjudication page's first view right after one new judgment and right after one void
    (what an adjudicator waits for while annotators work), beside the same page warm (nothing
    changed since its last view); then the study and quality pages warm and after a judgment.
    The least of `repeats` tries each: the machine is shared."""
    live = LiveStudy(study, staff)
    base = f"/studies/{study.pk}"
    pages = {
        "adjudication queue": lambda item: f"{base}/adjudicate/",
        "adjudicate/next": lambda item: f"{base}/adjudicate/next/",
        "adjudication item": lambda item: f"{base}/adjudicate/{item}/",
        "study page": lambda item: f"{base}/",
        "quality page": lambda item: f"{base}/quality/",
    }
    events = {"warm": None, "after a judgment": live.judge, "after a void": live.void}
    adjudication_only = ("study page", "quality page")
    print(f"first view of a page, least of {repeats} (load {os.getloadavg()[0]:.2f}):")
    for name, path in pages.items():
        figures = []
        for event_name, event in events.items():
            if event_name == "after a void" and name in adjudication_only:
                continue
            seconds = []
            for _ in range(repeats):
                item = event() if event else live.judge()
                if event is None:
                    client.get(path(item))  # the change, followed; then the warm view
                status, _, wall, _ = timed_get(client, path(item))
                assert status[0] in "23", (name, status)
                seconds.append(wall)
            figures.append(f"{event_name} {min(seconds):.3f} s")
        print(f"  {name:20s} " + ", ".join(figures))
    quality_cost(study, repeats)


def quality_cost(study, repeats: int) -> None:
    """What the quality page pays on every view: its measures (one pass over the judgments) and
    the flags' refresh from them, apart (the least of `repeats` each)."""
    from annotation.services.quality import quality_measures, refresh_flags

    measured, refreshed = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        measures = quality_measures(study)
        measured.append(time.perf_counter() - started)
        started = time.perf_counter()
        refresh_flags(study, measures=measures)
        refreshed.append(time.perf_counter() - started)
    print(
        f"  quality page's work: measures {min(measured):.3f} s, refreshing the flags from them {min(refreshed):.3f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--slow", type=float, default=1.0, help="mark routes slower than this many seconds")
    parser.add_argument("--adjudication-only", action="store_true", help="the adjudication figures, no route walk")
    parser.add_argument("--repeats", type=int, default=3, help="tries of each first view after a change")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --database-url: measure the study of --items items an earlier run left there, if any",
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="staff-pages-"))
    redis_process = None
    try:
        setup_django(args.database_url, scratch)
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        from jobs.management.commands.run_platform import free_port, start_redis, stop_process
        from marginalia.celery import app
        from retrieval.metrics import evaluate_run
        from tests.factories import make_bulk_proxy_study
        from tests.routes import routes

        call_command("migrate", verbosity=0)
        settings.ALLOWED_HOSTS = ["*"]
        redis_process, app.conf.broker_url = start_redis(free_port())
        study = earlier_study(args.items) if args.reuse else None
        if study is None:
            started = time.perf_counter()
            study = make_bulk_proxy_study(args.items)
            add_run_results(study)
            # Stored when a run finishes (the factory writes hits directly), its qrels and results in place.
            study.negatives_run.metrics = evaluate_run(study.negatives_run, page_coverage=True)
            study.negatives_run.save(update_fields=["metrics"])
            print(f"study of {args.items:,} items x 3 judgments built in {time.perf_counter() - started:.1f} s")
        else:
            print(f"study of {args.items:,} items from an earlier run (its judgments since included)")
        run = study.negatives_run
        first_item = study.items.order_by("position").first()
        ids = {
            "study_id": study.pk,
            "run_id": run.pk,
            "collection_id": study.collection_id,
            "item_id": first_item.pk,
            "query_id": first_item.query_id,
        }
        client = Client()
        staff, _ = get_user_model().objects.get_or_create(
            username="staff-pages", defaults={"is_staff": True, "is_superuser": True}
        )
        client.force_login(staff)
        adjudication_figures(client, study)
        live_figures(client, study, staff, args.repeats)
        if args.adjudication_only:
            return
        failures = 0
        templates = dict(routes())
        annotator = get_user_model().objects.filter(judgments__item__study=study).order_by("pk").first().username
        asked = [(None, template) for template in sorted(set(templates.values()))]
        asked += [
            (query.format(annotator=annotator), templates[name])
            for name, queries in DATA_MANAGER_QUERIES.items()
            for query in queries
        ]
        for query, route in asked:
            names = re.findall(r"<(?:\w+:)?(\w+)>", route)
            if any(part in route for part in SKIPPED) or any(name not in ids for name in names):
                continue
            path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda match: str(ids[match.group(1)]), route)
            path += f"?{query}" if query else ""
            (status, size, *first), (_, _, *second) = timed_get(client, path), timed_get(client, path)
            seconds, cpu = max(first, second)
            failures += status[0] not in "234"
            mark = "  SLOW" if seconds > args.slow else ""
            print(f"{path:50s} {status:>5s} {size:>12,d} B {seconds:8.2f} s {cpu:6.2f} s CPU{mark}")
        print(f"{failures} routes failed")
    finally:
        if redis_process is not None:
            stop_process(redis_process)
        shutil.rmtree(scratch, ignore_errors=True)


def earlier_study(items: int):
    """The bulk study of `items` items an earlier run built in this database (the newest), if any:
    building 100K items takes minutes."""
    from django.db.models import Count

    from annotation.models import Study

    studies = Study.objects.filter(name__startswith="bulk-study-").annotate(size=Count("items"))
    return studies.filter(size=items).order_by("-pk").first()


def add_run_results(study) -> None:
    """What a finished run on a collection with qrels stores besides its hits: a qrel for each
    item's gold passage and the run's per-query result (candidate-set size, the gold's exact
    rank), written in bulk as the factory writes the study; a judge's answer on every tenth item
    and a flag on every hundredth, for the data manager's filters."""
    from django.contrib.auth import get_user_model

    from annotation.models import Item, ItemCandidate, ItemFlag
    from judges.models import Judge, JudgeAnswer
    from retrieval.models import Qrel, RunQuery
    from retrieval.planner import refresh_statistics

    run = study.negatives_run
    gold = ItemCandidate.objects.filter(item__study=study, is_gold=True).values_list(
        "item__query_id", "passage_id", "position"
    )
    qrels, results = [], []
    for query_id, passage_id, position in gold.iterator(chunk_size=10_000):
        qrels.append(Qrel(query_id=query_id, passage_id=passage_id, relevance=1))
        results.append(
            RunQuery(
                run=run,
                query_id=query_id,
                candidates=study.candidates_per_item,
                gold_rank=position + 1,
                relevant_ranks={str(passage_id): position + 1},
            )
        )
    Qrel.objects.bulk_create(qrels, batch_size=5000)
    RunQuery.objects.bulk_create(results, batch_size=5000)
    judge = Judge.objects.create(name="bulk-judge", backend=Judge.Backend.RUN)
    items = list(Item.objects.filter(study=study).order_by("position").values_list("pk", flat=True))
    JudgeAnswer.objects.bulk_create(
        [JudgeAnswer(judge=judge, item_id=pk, prompt_hash="bulk", parsed={"position": 0}) for pk in items[::10]],
        batch_size=5000,
    )
    flagger = get_user_model().objects.create(username="bulk-flagger")
    ItemFlag.objects.bulk_create(
        [ItemFlag(item_id=pk, annotator=flagger, reason="looks broken") for pk in items[::100]], batch_size=5000
    )
    refresh_statistics(Qrel, RunQuery, JudgeAnswer, ItemFlag)


if __name__ == "__main__":
    main()
