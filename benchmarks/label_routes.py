#!/usr/bin/env python
"""The label routes at scale, each against the work it cannot avoid, measured in the same run.

On a proxy study of --items items x 3 judgments (`tests.factories.make_bulk_proxy_study` with the
qrels and run results benchmarks/staff_pages.py adds, so its collection has --items queries,
3 x --items passages and a qrel per query), each route is asked as a superuser through Django's
test client, as a user gets it (the whole body read):
- /api/studies/ID/aggregate/ (majority, and ?method=dawid-skene),
- /api/studies/ID/soft-labels/ (the same two methods),
- /api/collections/ID/bundle/ (the imported qrels).
In the same run, on the same data, its peer: the steps any program returning that response has to
take, each done by the plain tool for it:
- read: a cursor's fetchall of the columns the response is made of (the counted judgments:
  id, time as text, item, annotator, chosen position; the soft labels also every item's position, query
  and shown passages; the bundle every passage, query and qrel);
- fit: crowd-kit's MajorityVote (and DawidSkene) fit on the DataFrame the route fits;
- encode: one json.dumps of the response's payload, parsed back from the route's body (a JSON
  lines body as one list of its rows; the bundle's JSON files one call each);
- zip: zipfile (deflated) of the bundle's files, the same bytes.
Prints, per route, the minimum over --repeats of the route's seconds and of each peer step (wall
and process CPU: on SQLite the database works in this process; on a loaded machine CPU is the
steadier figure), and the ratio route / (sum of the peer steps). --json adds one JSON object as
the last line.

The study is built once per database: given --database-url of a database that already holds a
study of --items items built here, it is reused (build a 100K-item one once, a few minutes on
2 cores, then measure as often as needed); --save DIR writes each route's body there, to compare
two versions of the code on the same database (cmp; the bundle unzipped, bundle.json's created_at
aside).

Usage, from the project root:
    .venv/bin/python benchmarks/label_routes.py [--items 2000] [--repeats 3]
        [--database-url sqlite:////tmp/label-routes.sqlite3] [--save DIR] [--json]
Default: a SQLite file in a temporary folder, deleted afterwards.
"""

import argparse
import io
import json
import shutil
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from paper_scale import setup_django  # noqa: E402
from staff_pages import add_run_results  # noqa: E402

METHODS = ("majority", "dawid-skene")


def timed(work) -> tuple[float, float, object]:
    """Wall and process CPU seconds of work(), and what it returned."""
    started, cpu_started = time.perf_counter(), time.process_time()
    result = work()
    return time.perf_counter() - started, time.process_time() - cpu_started, result


class Best:
    """The minimum wall and CPU seconds seen of one thing over the repeats."""

    def __init__(self):
        self.wall = self.cpu = float("inf")

    def add(self, wall: float, cpu: float) -> None:
        self.wall, self.cpu = min(self.wall, wall), min(self.cpu, cpu)

    def as_dict(self) -> dict:
        return {"wall": self.wall, "cpu": self.cpu}


def bulk_study(items: int):
    """The study of `items` items this benchmark built in the database before, or a new one."""
    from django.db.models import Count

    from annotation.models import Study
    from retrieval.metrics import evaluate_run
    from retrieval.models import Qrel
    from tests.factories import make_bulk_proxy_study

    built = (
        Study.objects.filter(name__startswith="bulk-study-", kind=Study.Kind.PROXY)
        .annotate(size=Count("items"))
        .filter(size=items)
        .order_by("pk")
        .first()
    )
    if built is not None and Qrel.objects.filter(query__collection=built.collection).exists():
        print(f"reusing the study of {items:,} items x 3 judgments in the database")
        return built
    started = time.perf_counter()
    study = make_bulk_proxy_study(items)
    add_run_results(study)
    study.negatives_run.metrics = evaluate_run(study.negatives_run, page_coverage=True)
    study.negatives_run.save(update_fields=["metrics"])
    print(f"study of {items:,} items x 3 judgments built in {time.perf_counter() - started:.1f} s")
    return study


def fetchall(sql: str, params: list) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def table(model) -> str:
    return model._meta.db_table


def read_judgments(study) -> list[tuple]:
    """The counted judgments' columns the aggregation starts from (nothing voided or blocked in
    the bulk study: its live work judgments are all counted), the time as the database's text, as
    the routes read it (a datetime per row costs more than the rest of the row)."""
    from annotation.models import ItemCandidate, Judgment

    return fetchall(
        f"SELECT j.id, CAST(j.submitted_at AS text), j.item_id, j.annotator_id, c.position FROM {table(Judgment)} j "
        f"JOIN {table(ItemCandidate)} c ON c.id = j.choice_id "
        "WHERE j.study_id = %s AND j.item_role = 'work' AND NOT j.voided",
        [study.pk],
    )


def read_items(study) -> list[tuple]:
    """What a soft-label row names an item by: its position, query and shown passages."""
    from annotation.models import Item, ItemCandidate
    from retrieval.models import Passage, Query

    items = fetchall(
        f"SELECT i.id, i.position, q.external_id FROM {table(Item)} i JOIN {table(Query)} q ON q.id = i.query_id "
        "WHERE i.study_id = %s",
        [study.pk],
    )
    shown = fetchall(
        f"SELECT c.item_id, p.external_id FROM {table(ItemCandidate)} c JOIN {table(Item)} i ON i.id = c.item_id "
        f"JOIN {table(Passage)} p ON p.id = c.passage_id WHERE i.study_id = %s ORDER BY c.item_id, c.position",
        [study.pk],
    )
    return items + shown


def read_collection(collection) -> list[tuple]:
    """Every passage, query and qrel the bundle writes, with the columns it writes them from."""
    from retrieval.models import Passage, Qrel, Query

    passages = fetchall(
        f"SELECT external_id, title, text FROM {table(Passage)} WHERE collection_id = %s ORDER BY ordinal, id",
        [collection.pk],
    )
    queries = fetchall(
        f"SELECT external_id, text, left_context, right_context, metadata, split FROM {table(Query)} "
        "WHERE collection_id = %s ORDER BY ordinal, id",
        [collection.pk],
    )
    qrels = fetchall(
        f"SELECT q.external_id, p.external_id, r.relevance FROM {table(Qrel)} r "
        f"JOIN {table(Query)} q ON q.id = r.query_id JOIN {table(Passage)} p ON p.id = r.passage_id "
        "WHERE q.collection_id = %s ORDER BY q.ordinal, q.id, p.ordinal, p.id",
        [collection.pk],
    )
    return passages + queries + qrels


def crowd_kit_frame(study):
    """The DataFrame the routes hand crowd-kit, built as they build it (not timed)."""
    from evaluation.label_models import columns_frame
    from evaluation.ratings import study_ratings

    return columns_frame(*study_ratings(study).columns())


def fitter(method: str, frame):
    from crowdkit.aggregation import DawidSkene, MajorityVote

    if method == "majority":
        return lambda: MajorityVote().fit(frame)
    # What the route fits for Dawid-Skene: the model, and the majority vote it is compared with.
    return lambda: (DawidSkene().fit(frame), MajorityVote().fit(frame))


def json_payload_encoder(body: bytes):
    payload = json.loads(body)
    return lambda: json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def json_lines_encoder(body: bytes):
    rows = [json.loads(line) for line in body.splitlines()]
    return lambda: json.dumps(rows, ensure_ascii=False)


def bundle_files(body: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def bundle_encoder(body: bytes):
    """The bundle's JSON files encoded again, each with one json.dumps (a JSON lines file as one
    list of its records)."""
    parsed = []
    for name, data in bundle_files(body).items():
        if name.endswith(".jsonl"):
            parsed.append([json.loads(line) for line in data.splitlines()])
        elif name.endswith(".json"):
            parsed.append(json.loads(data))
    return lambda: [json.dumps(value, ensure_ascii=False) for value in parsed]


def bundle_zipper(body: bytes):
    files = bundle_files(body)

    def zip_files():
        with tempfile.TemporaryFile() as archive, zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
            for name, data in files.items():
                bundle.writestr(name, data)

    return zip_files


def routes(study, frame) -> dict[str, dict]:
    """Route name -> its path and its peer's steps (name -> a function of the route's body that
    returns the step's work)."""
    collection_read = {"read": lambda body: lambda: read_collection(study.collection)}
    found = {}
    for method in METHODS:
        query = "" if method == "majority" else f"?method={method}"
        frame_fit = {"fit": lambda body, method=method: fitter(method, frame)}
        found[f"aggregate {method}"] = {
            "path": f"/api/studies/{study.pk}/aggregate/{query}",
            "peer": {"read": lambda body: lambda: read_judgments(study), **frame_fit, "encode": json_payload_encoder},
        }
        found[f"soft-labels {method}"] = {
            "path": f"/api/studies/{study.pk}/soft-labels/{query}",
            "peer": {
                "read": lambda body: lambda: (read_judgments(study), read_items(study)),
                **frame_fit,
                "encode": json_lines_encoder,
            },
        }
    found["bundle"] = {
        "path": f"/api/collections/{study.collection_id}/bundle/",
        "peer": {**collection_read, "encode": bundle_encoder, "zip": bundle_zipper},
    }
    return found


def request(client, path: str) -> tuple[int, bytes]:
    response = client.get(path)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, body


def measure(client, study, frame, repeats: int, save: Path | None) -> dict:
    asked = routes(study, frame)
    best = {name: {"route": Best(), **{step: Best() for step in route["peer"]}} for name, route in asked.items()}
    answers = {}
    for repeat in range(repeats):
        for name, route in asked.items():
            wall, cpu, (status, body) = timed(lambda route=route: request(client, route["path"]))
            best[name]["route"].add(wall, cpu)
            answers[name] = (status, len(body))
            if status != 200:
                raise SystemExit(f"{route['path']} answered {status}: {body[:300]!r}")
            if save is not None and repeat == 0:
                (save / f"{name.replace(' ', '-')}.{'zip' if name == 'bundle' else 'json'}").write_bytes(body)
            for step, make in route["peer"].items():
                work = make(body)
                wall, cpu, _ = timed(work)
                best[name][step].add(wall, cpu)
            del body
    figures = {}
    for name, found in best.items():
        steps = {step: found[step].as_dict() for step in asked[name]["peer"]}
        peer = {clock: sum(step[clock] for step in steps.values()) for clock in ("wall", "cpu")}
        route = found["route"].as_dict()
        figures[name] = {
            "path": asked[name]["path"],
            "status": answers[name][0],
            "bytes": answers[name][1],
            "route": route,
            "peer": {**peer, "steps": steps},
            "ratio": {clock: route[clock] / peer[clock] for clock in ("wall", "cpu")},
        }
    return figures


def print_table(figures: dict) -> None:
    print(
        f"{'route':<24} {'bytes':>12}  {'peer wall':>9} {'route wall':>10} {'ratio':>6}  "
        f"{'peer CPU':>8} {'route CPU':>9} {'ratio':>6}  peer steps (CPU s)"
    )
    for name, found in figures.items():
        peer, route, ratio = found["peer"], found["route"], found["ratio"]
        steps = ", ".join(f"{step} {seconds['cpu']:.2f}" for step, seconds in peer["steps"].items())
        print(
            f"{name:<24} {found['bytes']:>12,d}  {peer['wall']:9.2f} {route['wall']:10.2f} {ratio['wall']:5.2f}x  "
            f"{peer['cpu']:8.2f} {route['cpu']:9.2f} {ratio['cpu']:5.2f}x  {steps}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2000, help="100000 for the figures in docs/deployment.md")
    parser.add_argument("--repeats", type=int, default=3, help="the minimum of this many of each is printed")
    parser.add_argument("--database-url", default=None, help="a database to build the study in, or reuse it from")
    parser.add_argument("--save", type=Path, default=None, help="write each route's body into this folder")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # crowd-kit's pandas-3 deprecation warnings
    if args.save is not None:
        args.save.mkdir(parents=True, exist_ok=True)

    scratch = Path(tempfile.mkdtemp(prefix="label-routes-"))
    try:
        setup_django(args.database_url, scratch)
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.test import Client

        call_command("migrate", verbosity=0)
        settings.ALLOWED_HOSTS = ["*"]
        study = bulk_study(args.items)
        frame = crowd_kit_frame(study)
        judgments = len(read_judgments(study))
        if judgments != len(frame):
            raise SystemExit(f"the peer reads {judgments} judgments where the routes fit {len(frame)}")
        user, _ = get_user_model().objects.get_or_create(
            username="label-routes", defaults={"is_staff": True, "is_superuser": True}
        )
        client = Client()
        client.force_login(user)
        # As a server that has answered before: the URLconf (every view's module) loaded.
        request(client, f"/api/studies/{study.pk}/")
        print(f"{args.items:,} items, {judgments:,} judgments; minimum of {args.repeats} repeats")
        figures = measure(client, study, frame, args.repeats, args.save)
        print_table(figures)
        if args.json:
            print(json.dumps({"items": args.items, "judgments": judgments, "repeats": args.repeats, "routes": figures}))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
