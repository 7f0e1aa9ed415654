#!/usr/bin/env python
"""How much faster our BM25 is than rank_bm25 on the same work, with the same scores.

Data as in the contract check's speed mode: the three Gutenberg books split into sentences
(~13K passages) and the queries of BIRCO's RELiC dev split (50 paragraph-long queries), one
candidate set for all. Prints, for all queries:
  - rank_bm25: BM25Okapi built once, get_scores per query;
  - ours, in memory: tokenising, indexing, scoring and ranking the top 100;
  - ours, end to end: `execute_run`'s own reported seconds, which add loading the passages from
    the database and storing hits and gold ranks (a scratch SQLite database in a temp folder),
    cold (tokenising the candidate set) and warm (its term counts cached, as after an import);
and the ratios. Then, per query, on RELiC-like masked-quotation queries (4 sentences each side of
a held-out sentence of the same books, 1,000 by default), one candidate set of all sentences:
ours scoring the queries as one batch (what a run does) and one at a time, bm25s (a fast peer
that precomputes per-token score vectors; same tokens, default settings) and rank_bm25, with
ratios, and whether ours equals rank_bm25 bit for bit. Last, a run's phases: --run-queries
(1,000) masked-quotation queries of Pride and Prejudice against its 1-sentence windows, ranked by
`execute_run` after the import's term-count warm-up, timed inside the run (scoring with index
building, top-100 selection with exact gold ranks, storing) against peers measured on the same
data in the same process: ours one query at a time (index + `scores([query])`, no ranking,
timed before and after the run; goal for the run's BM25 phase <= 1.1x), bm25s's batched
`retrieve(k=100)` (index + retrieve), and a raw executemany (SQLite) or COPY (Postgres) of the
same hit tuples into the same table; the whole run's goal is <= bm25s + raw storing. Wall and
CPU seconds, the best of --repeats; on a shared machine the CPU time is what the work itself
cost. Usage, from the project root:
    .venv/bin/python benchmarks/bm25_speed.py [--data ../shared/data] [--reference-queries N]
        [--masked-queries N] [--run-queries N] [--repeats 3] [--database-url postgres://...]
With --database-url the database must exist and be empty (it is migrated); default: a SQLite
file in a temporary folder.
"""

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BOOKS = ("pride_and_prejudice", "persuasion", "heart_of_darkness")


def book_sentences(data: Path, book: str) -> list[str]:
    raw = (data / "gutenberg" / f"{book}.txt").read_text(encoding="utf-8-sig")
    return [sentence.strip() for sentence in re.split(r"(?<=[.!?;:])\s+", raw) if len(sentence.strip()) > 20]


def load_data(data: Path) -> tuple[list[str], list[dict]]:
    texts = [sentence for book in BOOKS for sentence in book_sentences(data, book)]
    queries = [
        json.loads(line)
        for line in (data / "birco-relic-dev" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return texts, queries


def masked_quotation_queries(texts: list[str], count: int, seed: int = 0) -> list[str]:
    """RELiC-shaped queries: the 4 sentences before and the 4 after a held-out sentence."""
    rng = np.random.default_rng(seed)
    centres = rng.choice(np.arange(4, len(texts) - 4), size=min(count, len(texts) - 8), replace=False)
    return [" ".join(texts[centre - 4 : centre] + texts[centre + 1 : centre + 5]) for centre in centres.tolist()]


def per_query_times(passages: list[list[str]], queries: list[list[str]], reference_queries: int) -> dict:
    """Milliseconds per query (and index seconds) for ours, bm25s and rank_bm25 on one candidate
    set, all timed in this process on the same tokens; rank_bm25 on the first
    `reference_queries` queries only (it is linear in them), and ours checked against it."""
    import bm25s
    from rank_bm25 import BM25Okapi

    from retrieval.bm25 import BM25Index

    def timed(work):
        started = time.perf_counter()
        result = work()
        return time.perf_counter() - started, result

    ours_index_s, index = timed(lambda: BM25Index(passages, k1=0.5, b=0.9))
    ours_batch_s, our_scores = timed(lambda: index.scores(queries))
    ours_single_s, _ = timed(lambda: [index.scores([query]) for query in queries])
    peer = bm25s.BM25(k1=0.5, b=0.9)
    with contextlib.redirect_stdout(io.StringIO()):  # bm25s prints a line even without progress bars
        peer_index_s, _ = timed(lambda: peer.index(passages, show_progress=False))
    peer_s, _ = timed(lambda: [peer.get_scores(query) for query in queries])
    sample = queries[: max(1, min(reference_queries, len(queries)))]
    reference_index_s, reference = timed(lambda: BM25Okapi(passages, k1=0.5, b=0.9))
    reference_s, reference_scores = timed(lambda: np.array([reference.get_scores(query) for query in sample]))
    per_query = {
        "ours_batch_ms": 1000 * ours_batch_s / len(queries),
        "ours_one_at_a_time_ms": 1000 * ours_single_s / len(queries),
        "bm25s_ms": 1000 * peer_s / len(queries),
        "rank_bm25_ms": 1000 * reference_s / len(sample),
    }
    return {
        "passages": len(passages),
        "queries": len(queries),
        "rank_bm25_queries": len(sample),
        "index_s": {"ours": ours_index_s, "bm25s": peer_index_s, "rank_bm25": reference_index_s},
        "per_query_ms": per_query,
        "ratios": {
            "ours_batch / bm25s": per_query["ours_batch_ms"] / per_query["bm25s_ms"],
            "ours_one_at_a_time / bm25s": per_query["ours_one_at_a_time_ms"] / per_query["bm25s_ms"],
            "ours_batch / ours_one_at_a_time": per_query["ours_batch_ms"] / per_query["ours_one_at_a_time_ms"],
            "ours_batch / rank_bm25": per_query["ours_batch_ms"] / per_query["rank_bm25_ms"],
            "bm25s / rank_bm25": per_query["bm25s_ms"] / per_query["rank_bm25_ms"],
        },
        "identical_to_rank_bm25": bool(np.array_equal(our_scores[: len(sample)], reference_scores)),
    }


def print_per_query(result: dict) -> None:
    print(
        f"per query, {result['passages']} passages x {result['queries']} masked-quotation queries "
        f"(rank_bm25 on {result['rank_bm25_queries']}):"
    )
    for name, seconds in result["index_s"].items():
        print(f"  index {name:<10} {seconds:8.3f} s")
    for name, milliseconds in result["per_query_ms"].items():
        print(f"  {name:<24} {milliseconds:8.3f} ms/query")
    for name, ratio in result["ratios"].items():
        print(f"  {name:<34} {ratio:8.3f}")
    print(f"  ours identical to rank_bm25 bit for bit: {result['identical_to_rank_bm25']}")


def time_rank_bm25(texts, queries, sample: int) -> tuple[float, np.ndarray]:
    """rank_bm25's time for all queries, measured on the first `sample` and scaled (its cost is
    linear in the number of queries), and its scores for those."""
    from rank_bm25 import BM25Okapi

    from retrieval.bm25 import tokenize

    started = time.perf_counter()
    bm25 = BM25Okapi([tokenize(text) for text in texts], k1=0.5, b=0.9)
    scores = np.array([bm25.get_scores(tokenize(query["text"])) for query in queries[:sample]])
    return (time.perf_counter() - started) * len(queries) / sample, scores


def time_ours_in_memory(texts, queries) -> tuple[float, np.ndarray]:
    from retrieval.bm25 import BM25Index, tokenize_all
    from retrieval.ranking import tie_break, top_ranked

    started = time.perf_counter()
    scores = BM25Index(tokenize_all(texts), k1=0.5, b=0.9).scores(tokenize_all(q["text"] for q in queries))
    top_ranked(scores, 100, tie_break([str(number) for number in range(len(texts))]))
    return time.perf_counter() - started, scores


def time_ours_end_to_end(texts, queries) -> tuple[float, float]:
    """`execute_run`'s seconds twice: cold (the candidate set is tokenised and its term counts
    cached) and warm (counts loaded, as on any rerun and on the first run after an import)."""
    from django.core.management import call_command

    from retrieval.models import Collection, Passage, Query
    from retrieval.services.runs import create_run, execute_run, get_or_create_retriever

    call_command("migrate", verbosity=0)
    collection = Collection.objects.create(name="bm25-speed", kind=Collection.Kind.BEIR)
    Passage.objects.bulk_create(
        [Passage(collection=collection, external_id=f"s{i}", text=text, ordinal=i) for i, text in enumerate(texts)],
        batch_size=2000,
    )
    Query.objects.bulk_create(
        [Query(collection=collection, external_id=q["_id"], text=q["text"], ordinal=i) for i, q in enumerate(queries)]
    )
    retriever = get_or_create_retriever("bm25", k1=0.5, b=0.9)
    cold = execute_run(create_run(collection, retriever, depth=100))
    warm = execute_run(create_run(collection, retriever, depth=100))
    return cold.seconds, warm.seconds


def clocks() -> np.ndarray:
    """(wall seconds, this process's CPU seconds) now: on a shared machine the CPU time is what
    the work itself cost, the wall time adds waiting for a core (and, on Postgres, the server)."""
    return np.array([time.perf_counter(), time.process_time()])


class PhaseTimer:
    """Wall and CPU seconds spent inside chosen functions during a run, by phase (wrappers set
    for the run and removed after it)."""

    def __init__(self):
        self.seconds: dict[str, np.ndarray] = {}
        self.restore: list[tuple[object, str, object]] = []

    def wrap(self, owner, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def timed_call(*args, **kwargs):
            started = clocks()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + clocks() - started

        self.restore.append((owner, name, original))
        setattr(owner, name, timed_call)

    def __exit__(self, *exc) -> None:
        for owner, name, original in reversed(self.restore):
            setattr(owner, name, original)

    def __enter__(self):
        return self


def raw_store(rows: list[tuple]) -> np.ndarray:
    """Wall and CPU seconds to insert hit tuples the way a hand-written loader would: one
    executemany of one INSERT on the DB-API connection (SQLite), one text COPY fed row by row
    (Postgres)."""
    from django.db import connection, transaction

    from retrieval.models import Hit

    columns = "run_id, query_id, passage_id, rank, score"
    started = clocks()
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {Hit._meta.db_table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            connection.connection.executemany(
                f"INSERT INTO {Hit._meta.db_table} ({columns}) VALUES (?, ?, ?, ?, ?)", rows
            )
    return clocks() - started


def one_query_at_a_time(sentences: list[str], queries: list[str]) -> np.ndarray:
    """Ours scoring one query at a time, with the index built from the cached term counts."""
    from retrieval.bm25 import BM25Index, cached_term_counts, tokenize_all
    from retrieval.services.runs import term_counts_folder

    started = clocks()
    index = BM25Index.from_counts(cached_term_counts(sentences, term_counts_folder()), k1=0.5, b=0.9)
    for query in tokenize_all(queries):
        index.scores([query])
    return clocks() - started


def run_phases(sentences: list[str], queries: list[str]) -> dict:
    """One run's phases and its peers on the same data (see the module's docstring)."""
    import bm25s

    from retrieval.bm25 import BM25Scorer, tokenize_all
    from retrieval.models import Collection, Hit, Passage, Query, Run
    from retrieval.services import run_writer, runs

    collection = Collection.objects.create(name=f"phases-{time.time_ns()}", kind=Collection.Kind.BEIR)
    Passage.objects.bulk_create(
        [Passage(collection=collection, external_id=f"s{i}", text=text, ordinal=i) for i, text in enumerate(sentences)],
        batch_size=2000,
    )
    Query.objects.bulk_create(
        [Query(collection=collection, external_id=f"q{i}", text=text, ordinal=i) for i, text in enumerate(queries)],
        batch_size=2000,
    )
    runs.warm_term_counts(collection)  # what an import does
    retriever = runs.get_or_create_retriever("bm25", k1=0.5, b=0.9)
    one_at_a_time = one_query_at_a_time(sentences, queries)  # measured before and after the run
    with PhaseTimer() as timer:
        timer.wrap(BM25Scorer, "score", "scoring")
        timer.wrap(runs, "top_ranked", "top-k")
        timer.wrap(runs, "ranks_of", "top-k")
        timer.wrap(run_writer.RunWriter, "flush", "storing")
        run = runs.execute_run(runs.create_run(collection, retriever, depth=100))
    phases = dict(timer.seconds, run=np.array([run.seconds, np.nan]))
    phases["bm25"] = phases["scoring"] + phases["top-k"]
    rows = list(
        Hit.objects.filter(run=run)
        .order_by("query_id", "rank")
        .values_list("run_id", "query_id", "passage_id", "rank", "score")
    )
    Hit.objects.filter(run=run).delete()
    peers = {"raw storing": raw_store(rows)}
    Run.objects.filter(pk=run.pk).delete()

    peers["ours one at a time"] = np.minimum(one_at_a_time, one_query_at_a_time(sentences, queries))
    started = clocks()
    peer = bm25s.BM25(k1=0.5, b=0.9)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        peer.index(tokenize_all(sentences), show_progress=False)
        peer.retrieve(tokenize_all(queries), k=100, show_progress=False)
    peers["bm25s index + retrieve"] = clocks() - started
    Collection.objects.filter(pk=collection.pk).delete()
    return {"hits": len(rows), "phases": phases, "peers": peers}


def report_run_phases(sentences: list[str], queries: list[str], repeats: int) -> None:
    from django.db import connection

    results = [run_phases(sentences, queries) for _ in range(repeats)]
    best = {
        group: {name: np.min([result[group][name] for result in results], axis=0) for name in results[0][group]}
        for group in ("phases", "peers")
    }
    phases, peers = best["phases"], best["peers"]
    print(
        f"a BM25 run: {len(queries)} masked-quotation queries x {len(sentences)} windows of one book,"
        f" {results[0]['hits']} hits, {connection.vendor}, best of {repeats}, load average {os.getloadavg()[0]:.1f}"
    )
    print(f"  {'':<26} {'wall s':>8} {'CPU s':>8}")
    for name, (wall, cpu) in {**phases, **peers}.items():
        print(f"  {name:<26} {wall:8.3f} {cpu:8.3f}")
    whole_peer = peers["bm25s index + retrieve"] + peers["raw storing"]
    print("  ratios, wall and CPU (CPU: the work itself, whatever else the machine runs):")
    for label, ratio, goal in (
        ("run's BM25 phase / ours one at a time", phases["bm25"] / peers["ours one at a time"], "<= 1.1"),
        ("top-k / scoring", phases["top-k"] / phases["scoring"], ""),
        ("storing / raw storing", phases["storing"] / peers["raw storing"], ""),
        ("whole run / (bm25s retrieve + raw storing)", phases["run"] / whole_peer, "<= 1.0 (wall)"),
    ):
        print(f"  {label:<44} {ratio[0]:6.3f} {ratio[1]:6.3f}   {f'(goal {goal})' if goal else ''}")


def report(texts: list[str], queries: list[dict], reference_queries: int, masked_queries: int) -> None:
    from retrieval.bm25 import tokenize_all

    print_per_query(
        per_query_times(
            tokenize_all(texts), tokenize_all(masked_quotation_queries(texts, masked_queries)), reference_queries
        )
    )
    sample = max(1, min(reference_queries, len(queries)))
    print(f"{len(texts)} passages x {len(queries)} queries (rank_bm25 timed on {sample}, scaled)")
    ours_memory, our_scores = time_ours_in_memory(texts, queries)
    ours_cold, ours_warm = time_ours_end_to_end(texts, queries)
    theirs, their_scores = time_rank_bm25(texts, queries, sample)
    identical = np.array_equal(our_scores[:sample], their_scores)
    print(f"rank_bm25:                     {theirs:8.3f} s")
    print(f"ours, index+score+rank:        {ours_memory:8.3f} s   ratio {ours_memory / theirs:.4f}")
    print(f"ours, execute_run, cold:       {ours_cold:8.3f} s   ratio {ours_cold / theirs:.4f}   (goal <= 0.02)")
    print(f"ours, execute_run, warm:       {ours_warm:8.3f} s   ratio {ours_warm / theirs:.4f}   (term counts cached)")
    print(f"scores identical to rank_bm25 on the timed queries: {identical}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument(
        "--reference-queries",
        type=int,
        default=20,
        help="queries rank_bm25 is timed on (scaled to all); the contract check uses 20",
    )
    parser.add_argument("--masked-queries", type=int, default=1000, help="masked-quotation queries timed per query")
    parser.add_argument("--run-queries", type=int, default=1000, help="queries of the timed run (0: no run phases)")
    parser.add_argument("--repeats", type=int, default=3, help="runs timed for the run phases (the best counts)")
    parser.add_argument("--database-url", default="", help="an empty database to use instead of a SQLite file")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bm25-speed-"))
    os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{scratch / 'db.sqlite3'}"
    os.environ["MARGINALIA_DATA_DIR"] = str(scratch / "data")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()

    try:
        report(*load_data(args.data), args.reference_queries, args.masked_queries)
        if args.run_queries:
            book = book_sentences(args.data, "pride_and_prejudice")
            report_run_phases(book, masked_quotation_queries(book, args.run_queries, seed=1), args.repeats)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
