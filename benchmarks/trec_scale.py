#!/usr/bin/env python
"""TREC scale on the machine it runs on: how much faster imports, runs and the annotator API get
with 1..N workers, and what full RELiC would take.

In one run, on a scratch database (an SQLite file, or the empty Postgres database --database-url
names): a RELiC-sized collection is built as benchmarks/paper_scale.py builds it (--books of its
79 synthetic books made from the Gutenberg novels in ../shared/data, every 1-5 sentence window a
candidate, the books' share of RELiC's 78,574 masked-quotation queries); then for each worker
count W of --workers, W Celery worker processes (one task at a time each; torch threads = cores
/ W) are started and, timed from queueing to the job's success as a user waits:
  - import: `import_relic --async` of the collection (a job per book);
  - bm25: `retrieve --retriever bm25 --async` over it (MARGINALIA_RUN_SHARDS = --shards), every
    worker count checked to store the same hits, score for score;
  - dense (with --dense, or by default on a CUDA machine): `retrieve --retriever dense --async`
    over BIRCO's RELiC dev pools (50 long queries, ~2.5K passages), embedding cache emptied first;
and the largest resident memory of a worker process. Then the annotator API
(benchmarks/annotator_load.py on its own --items-item study, gunicorn with W workers,
--annotators annotators starting spread over --ramp seconds): at a realistic pace (2-5 s per
item; p50/p95 of next and submit, first requests left out) and flat out (requests/s). Printed:
one table, with each step's speed-up against 1 worker measured in the same run, and the
extrapolation to full RELiC where a step ran a stated fraction of it (said as such).

Usage, from the project root:
    .venv/bin/python benchmarks/trec_scale.py [--workers 1,2,4] [--books 4] [--shards 8] [--dense]
        [--annotators 200] [--items 10000] [--seconds 30] [--database-url postgres://...] [--json]
    .venv/bin/python benchmarks/trec_scale.py --tiny --json    (seconds: what the test suite runs)
With --json the last line is one JSON object: `import`, `bm25` (and `dense`) with `workers` (worker
count -> seconds), `speedup`, `peak_mib` and `full_relic_s`; `annotators` with `workers` (worker
count -> realistic and flat figures) and `speedup` (flat requests/s against 1 worker).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import paper_scale  # noqa: E402
from benchmarks.annotator_load import ScratchDatabase  # noqa: E402
from benchmarks.sharded_runs import (  # noqa: E402
    last_json,
    manage,
    scratch_platform,
    start_workers,
    wait_for_job,
    wait_until_workers_answer,
)

FULL_RELIC_WINDOWS = 1_774_120  # every 1-5 sentence window of paper_scale's 79 synthetic books


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--workers", default="1,2,4", help="Worker counts (comma-separated); 1 must be first.")
    parser.add_argument("--books", type=int, default=4, help="Synthetic RELiC books (of 79).")
    parser.add_argument("--shards", type=int, default=8, help="Shards per run.")
    parser.add_argument("--dense", action="store_true", help="Also time dense runs (default on a CUDA machine).")
    parser.add_argument("--annotators", type=int, default=200)
    parser.add_argument("--items", type=int, default=10_000, help="Items of the annotators' study.")
    parser.add_argument("--seconds", type=float, default=30.0, help="Annotator load per mode and worker count.")
    parser.add_argument("--ramp", type=float, default=5.0, help="Annotators start spread over these seconds.")
    parser.add_argument("--database-url", default="", help="An empty Postgres database (default: SQLite files).")
    parser.add_argument("--tiny", action="store_true", help="Seconds, not minutes: the test suite's size.")
    parser.add_argument("--json", action="store_true", help="Print the figures as one JSON object last.")
    arguments = parser.parse_args()
    if arguments.tiny:
        # What proves the contract, no more: a gunicorn start and a count of the judgments cost
        # seconds beside the load, so each worker count's server serves both modes (each on a study
        # of its own); a second of load gives every realistic annotator a measured `next` (started
        # within the ramp) and the flat ones dozens.
        arguments.workers, arguments.books, arguments.shards = "1,2", 2, 2
        arguments.annotators, arguments.items, arguments.seconds, arguments.ramp = 4, 30, 1.0, 0.5
    arguments.counts = [int(value) for value in arguments.workers.split(",")]
    if arguments.counts[0] != 1:
        raise SystemExit("trec_scale: --workers must start with 1 (speed-ups are against one worker)")
    return arguments


def cuda_available() -> bool:
    """Whether torch sees a GPU; torch (seconds to import) is not asked where no GPU driver is."""
    if not any(Path(device).exists() for device in ("/proc/driver/nvidia", "/dev/kfd")):  # NVIDIA, ROCm
        return False
    import torch

    return torch.cuda.is_available()


@contextlib.contextmanager
def migrated_copy(folder: Path, env: dict, redis_url: str, database_url: str):
    """A copy of the freshly migrated SQLite scratch database, taken before anything is imported:
    the annotator load seeds its study into it instead of migrating once more (7-11 s of CPU).
    None on Postgres, where annotator_load migrates its own database next to the scratch one."""
    if not database_url.startswith("sqlite"):
        yield None
        return
    with ScratchDatabase("sqlite", None, folder, "migrated", database_url) as migrated:
        yield migrated.url


def write_collection(arguments, path: Path) -> int:
    """The synthetic RELiC books (tiny: 60 sentences and 2 queries per set); returns the queries."""
    sources = paper_scale.source_sentences(arguments.data)
    if arguments.tiny:
        paper_scale.BOOK_SENTENCES = 60
        return paper_scale.write_relic_file(sources, arguments.books, 2, path)
    return paper_scale.write_relic_file(sources, arguments.books, paper_scale.queries_per_set(), path)


def write_birco_pools(data: Path, target: Path, pools: int) -> int:
    """BIRCO's RELiC dev set cut to `pools` queries with their pools, as a BEIR folder; returns
    how many texts (passages and queries) a dense run over it encodes."""
    from benchmarks.dense_encode import birco_style_folder

    passages, queries = birco_style_folder(data / "birco-relic-dev", pools, target)
    return len(passages) + len(queries)


def worker_peak_mib(workers: list[subprocess.Popen]) -> float:
    """The largest peak resident memory (VmHWM) among the workers and their pool processes."""
    pids = {worker.pid for worker in workers}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if parent in pids:
                pids.add(int(entry))
    peak = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        peak = max([peak, *(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))])
    return peak / 1024


def hits_fingerprint(run_id: int) -> str:
    """sha256 of the run's hits by query and passage ids, rank and exact score (each worker count
    ranks its own copy of the collection, so row ids differ)."""
    import hashlib

    from retrieval.models import Hit

    digest = hashlib.sha256()
    hits = Hit.objects.filter(run_id=run_id).order_by("query__ordinal", "rank")
    for row in hits.values_list("query__external_id", "passage__external_id", "rank", "score").iterator(20_000):
        digest.update(repr(row).encode())
    return digest.hexdigest()


def timed_job(env: dict, *command) -> tuple[float, dict]:
    """Seconds from sending `manage.py COMMAND --json` (it queues a job) to that job's success."""
    started = time.perf_counter()
    queued = last_json(manage(env, *command, "--json"))
    outcome = wait_for_job(queued["job_id"])
    if outcome != "succeeded":
        raise SystemExit(f"trec_scale: `{' '.join(map(str, command[:2]))}` job {outcome}")
    return time.perf_counter() - started, queued


def stop(workers: list[subprocess.Popen]) -> None:
    """Stop the workers together: each finishes its warm shutdown while the others do theirs
    (one after another, W workers took W times the 5-10 s of one on the loaded 2-core machine)."""
    from jobs.management.commands.run_platform import stop_process

    for worker in workers:
        worker.terminate()
    for worker in workers:
        stop_process(worker)


def measure_workers(arguments, env: dict, folder: Path, relic: Path, birco: Path | None, redis_url: str) -> dict:
    """Import, BM25 (and dense) runs with each worker count, on the same data."""
    steps: dict[str, dict] = {name: {} for name in ("import", "bm25", "dense") if name != "dense" or birco}
    reference = None
    workers: list[subprocess.Popen] = []
    try:
        for count in arguments.counts:
            threads = str(max(1, (os.cpu_count() or 1) // count))
            workers, previous = (
                start_workers({**env, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}, count, folder),
                workers,
            )
            # The last count's workers shut down while these start (both take seconds on a busy
            # machine); nothing is timed before they are gone and every new worker answers.
            stop(previous)
            wait_until_workers_answer(redis_url, count)
            collection = f"scale-{count}"
            steps["import"][count], _ = timed_job(env, "import_relic", relic, "--collection", collection, "--async")
            steps["bm25"][count], queued = timed_job(
                env, "retrieve", "--collection", collection, "--retriever", "bm25", "--async"
            )
            fingerprint = hits_fingerprint(queued["run_id"])
            reference = reference or fingerprint
            if fingerprint != reference:
                raise SystemExit(f"trec_scale: the BM25 run on {count} workers stored other hits than on 1 worker")
            if birco is not None:
                shutil.rmtree(Path(env["MARGINALIA_DATA_DIR"]) / "embeddings", ignore_errors=True)
                steps["dense"][count], _ = timed_job(
                    env, "retrieve", "--collection", "birco", "--retriever", "dense", "--async"
                )
            peak = worker_peak_mib(workers)
            for step in steps.values():
                step.setdefault("peak_mib", {})[count] = round(peak, 1)
            print(f"  {count} worker(s): " + ", ".join(f"{name} {step[count]:.1f} s" for name, step in steps.items()))
    finally:
        stop(workers)
    return steps


def annotator_load(arguments, migrated_database: str | None) -> list[dict]:
    """benchmarks/annotator_load.py at every worker count, realistic then flat: one migrated,
    seeded study (copied from `migrated_database` where given) that every run gets a fresh copy
    of (tiny: a study per mode, both served by the worker count's one gunicorn); its results in
    that order."""
    if arguments.database_url:
        database = ["--database", "postgres", "--postgres-url", arguments.database_url]
    else:
        database = ["--database", "sqlite", "--migrated-database", migrated_database]
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "annotator_load.py"),
        *database,
        *("--mode", "both", "--workers", arguments.workers, "--annotators", str(arguments.annotators)),
        *("--items", str(arguments.items), "--seconds", str(arguments.seconds), "--ramp", str(arguments.ramp)),
        "--json",
        *(["--shared-server"] if arguments.tiny else []),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"trec_scale: annotator_load failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return [json.loads(line) for line in result.stdout.strip().splitlines()[-2 * len(arguments.counts) :]]


def finite(value: float) -> float | None:
    """A latency, or None where none was measured (JSON has no NaN)."""
    return None if value != value else value


def measure_annotators(arguments, migrated_database: str | None) -> dict:
    figures: dict = {"workers": {}}
    runs = annotator_load(arguments, migrated_database)
    for count, realistic, flat in zip(arguments.counts, runs[::2], runs[1::2], strict=True):
        figures["workers"][count] = {
            "realistic": {
                key: finite(realistic[key]) for key in ("next_p50_ms", "next_p95_ms", "submit_p50_ms", "submit_p95_ms")
            },
            "flat": {key: finite(flat[key]) for key in ("requests_per_second", "next_p95_ms", "submit_p95_ms")},
            "lost": realistic["lost"] + flat["lost"],
            "server_errors": realistic["server_errors"] + flat["server_errors"],
        }
        latency = f"{realistic['next_p50_ms']:.0f}/{realistic['next_p95_ms']:.0f}"  # NaN: none measured
        print(
            f"  gunicorn -w {count}: realistic next p50/p95 {latency} ms, flat {flat['requests_per_second']:.1f} req/s"
        )
    one = figures["workers"][1]["flat"]["requests_per_second"]
    figures["speedup"] = {
        count: round(entry["flat"]["requests_per_second"] / one, 2) for count, entry in figures["workers"].items()
    }
    return figures


def with_speedups(step: dict, full_share: float) -> dict:
    """{workers: {count: s}, speedup: {count: x}, peak_mib, full_relic_s: {count: s}} of a step
    that ran `full_share` of full RELiC."""
    seconds = {count: round(value, 2) for count, value in step.items() if isinstance(count, int)}
    return {
        "workers": seconds,
        "speedup": {count: round(seconds[1] / value, 2) for count, value in seconds.items()},
        "peak_mib": step["peak_mib"],
        "full_relic_s": {count: round(value / full_share, 1) for count, value in seconds.items()},
    }


def print_table(figures: dict, shares: dict) -> None:
    print()
    print(
        f"{'step':<11} {'workers':>7} {'seconds':>9} {'speed-up':>9} {'peak MiB':>9} {'full RELiC (extrapolated)':>27}"
    )
    for name in ("import", "bm25", "dense"):
        if name not in figures:
            continue
        step = figures[name]
        for count, seconds in step["workers"].items():
            full = step["full_relic_s"][count]
            print(
                f"{name:<11} {count:>7} {seconds:>9.2f} {step['speedup'][count]:>8.2f}x {step['peak_mib'][count]:>9.0f}"
                f" {full / 60:>20.1f} min   (ran {shares[name]:.2%})"
            )
    print(f"\n{'annotators':<11} {'workers':>7} {'next p50/p95 ms':>16} {'submit p50/p95 ms':>18}", end="")
    print(f" {'flat req/s':>11} {'speed-up':>9}")
    annotators = figures["annotators"]
    for count, entry in annotators["workers"].items():
        realistic, flat = entry["realistic"], entry["flat"]
        latencies = [
            "/".join(
                "-" if realistic[key] is None else f"{realistic[key]:.0f}"
                for key in (f"{kind}_p50_ms", f"{kind}_p95_ms")
            )
            for kind in ("next", "submit")
        ]
        print(
            f"{'':<11} {count:>7} {latencies[0]:>16} {latencies[1]:>18} {flat['requests_per_second']:>11.1f}"
            f" {annotators['speedup'][count]:>8.2f}x"
        )


def main() -> None:
    arguments = parse_arguments()
    dense = arguments.dense or cuda_available()
    with (
        scratch_platform(arguments.database_url, arguments.shards, "marginalia-trec-scale-") as platform,
        migrated_copy(*platform) as migrated_database,
    ):
        folder, env, redis_url, database_url = platform
        queries = write_collection(arguments, folder / "relic.json")
        birco, dense_texts = None, 0
        if dense:
            birco = folder / "birco"
            dense_texts = write_birco_pools(arguments.data, birco, 4 if arguments.tiny else 50)
            manage(env, "import_beir", birco, "--collection", "birco")
        device = ("on CUDA" if cuda_available() else "on CPU") if dense else "off"
        print(
            f"trec_scale: {os.cpu_count()} CPU cores, dense {device},"
            f" {database_url.split(':')[0]}, {arguments.books} of {paper_scale.RELIC_BOOKS} books, {queries} queries,"
            f" load average {os.getloadavg()[0]:.1f}"
        )
        steps = measure_workers(arguments, env, folder, folder / "relic.json", birco, redis_url)
        annotators = measure_annotators(arguments, migrated_database)
    shares = {
        "import": arguments.books / paper_scale.RELIC_BOOKS,
        "bm25": queries / paper_scale.RELIC_QUERIES,
        "dense": dense_texts / (FULL_RELIC_WINDOWS + paper_scale.RELIC_QUERIES),
    }
    figures = {name: with_speedups(step, shares[name]) for name, step in steps.items()}
    figures["annotators"] = annotators
    print_table(figures, shares)
    print(
        "EXTRAPOLATED: full RELiC = each step's seconds / the share of RELiC it ran (import: books, BM25: queries,"
        " dense: texts encoded)"
    )
    if arguments.json:
        print(json.dumps({"cpus": os.cpu_count(), "database": database_url.split(":")[0], **figures}, sort_keys=True))


if __name__ == "__main__":
    main()
