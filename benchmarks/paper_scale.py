#!/usr/bin/env python
"""Paper scale: what a full RELiC-sized study costs on this platform, measured on a stated
fraction and extrapolated (each extrapolation is printed as such).

The collection is synthetic but RELiC-shaped: 79 books, each one of the three Gutenberg novels
in ../shared/data with its sentences rotated (so each book's windows differ in order, not in
vocabulary); candidate sets = every n-sentence window of a book, n = 1..5 (~4.4K per set, RELiC
averages 4,888); 78,574 masked-quotation queries (4 sentences each side of the quote), spread
evenly over the 395 candidate sets. Printed, in one run:
  1. import: `import_relic` of --import-books books (with their share of the queries) in a child
     process: seconds and peak memory (its maxrss), extrapolated to 79 books;
  2. BM25 on the full-size candidate sets holding --fraction of the queries: count + index seconds
     per set and milliseconds per query (score + top 100), extrapolated to 78,574 queries;
     ours vs bm25s vs rank_bm25 per query on one set, as ratios (benchmarks/bm25_speed.py);
  3. hits stored per second through a run's writer (SQLite here; Postgres too when
     --postgres-url is given, in a child process on that database), and an end-to-end BM25 run
     over the imported books (`execute_run`'s seconds);
  4. dense encoding on CPU, ours vs raw sentence-transformers on --dense-passages windows, and
     the extrapolated time to encode every window and query of full RELiC;
  5. database size (the scratch SQLite file; the Postgres database when measured);
  6. a proxy study of --study-items items x 3 judgments: create (bulk), import the judgments
     (`import_judgments`), report (`study_report`), exports (`export_study`,
     `export_judgments`); with --export-items N, also export_study and export_judgments of an
     N-item study (the 100K figure: --export-items 100000, about 10 minutes here).
Defaults take a few minutes on a 2-core machine. Usage, from the project root:
    .venv/bin/python benchmarks/paper_scale.py [--fraction 0.01] [--postgres-url URL] [--export-items 0]
"""

import argparse
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks.migrated import copy_migrated_sqlite  # noqa: E402

BOOKS = ("pride_and_prejudice", "persuasion", "heart_of_darkness")
RELIC_BOOKS = 79
RELIC_QUERIES = 78_574
QUOTE_LENGTHS = (1, 2, 3, 4, 5)
CONTEXT = 4
DEPTH = 100
BOOK_SENTENCES = 0  # --book-sentences: cut every book short (the smoke test); 0 keeps them whole


def timed(work):
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


# --- the synthetic collection ---------------------------------------------------------------


def source_sentences(data: Path) -> list[list[str]]:
    import re

    books = []
    for name in BOOKS:
        raw = (data / "gutenberg" / f"{name}.txt").read_text(encoding="utf-8-sig")
        books.append([s.strip() for s in re.split(r"(?<=[.!?;:])\s+", raw) if len(s.strip()) > 20])
    return books


def synthetic_book(sources: list[list[str]], number: int) -> list[str]:
    sentences = sources[number % len(sources)]
    offset = (number * 997) % len(sentences)
    return (sentences[offset:] + sentences[:offset])[: BOOK_SENTENCES or None]


def windows(sentences: list[str], length: int) -> list[str]:
    return [" ".join(sentences[start : start + length]) for start in range(len(sentences) - length + 1)]


def queries_per_set() -> int:
    return -(-RELIC_QUERIES // (RELIC_BOOKS * len(QUOTE_LENGTHS)))


def masked_queries(sentences: list[str], length: int, count: int, seed: int) -> list[tuple[int, str]]:
    """(quote start, query text): CONTEXT sentences left and right of an n-sentence quote."""
    rng = np.random.default_rng(seed)
    possible = np.arange(CONTEXT, len(sentences) - length - CONTEXT)
    starts = rng.choice(possible, size=min(count, len(possible)), replace=False)
    return [
        (
            int(start),
            " ".join(sentences[start - CONTEXT : start] + sentences[start + length : start + length + CONTEXT]),
        )
        for start in starts.tolist()
    ]


# --- 1. import ------------------------------------------------------------------------------


def write_relic_file(sources, books: int, per_set: int, path: Path) -> int:
    """RELiC JSON for the first `books` synthetic books and their queries; returns the query count."""
    data, queries = {}, 0
    for number in range(books):
        sentences = synthetic_book(sources, number)
        quotes = {}
        for length in QUOTE_LENGTHS:
            for start, _ in masked_queries(sentences, length, per_set, seed=number * 10 + length):
                left = sentences[start - CONTEXT : start]
                right = sentences[start + length : start + length + CONTEXT]
                quotes[f"b{number}-n{length}-{start}"] = [left, start, length, right]
        data[f"book{number}"] = {
            "quotes": quotes,
            "sentences": sentences,
            "candidates": {f"{n}_sentence": list(range(len(sentences) - n + 1)) for n in QUOTE_LENGTHS},
        }
        queries += len(quotes)
    path.write_text(json.dumps(data), encoding="utf-8")
    return queries


def measure_import(sources, books: int, per_set: int, scratch: Path, environment: dict) -> dict:
    path = scratch / "relic.json"
    queries = write_relic_file(sources, books, per_set, path)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    seconds, result = timed(
        lambda: subprocess.run(
            [sys.executable, "manage.py", "import_relic", str(path), "--collection", "paper", "--json"],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            check=True,
        )
    )
    peak_kib = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    return {"books": books, "queries": queries, "seconds": seconds, "peak_mib": peak_kib / 1024, "summary": summary}


# --- 2. BM25 ----------------------------------------------------------------------------------


def measure_bm25(sources, fraction: float) -> dict:
    """Full-size candidate sets, each with its full share of queries, as many sets as hold
    `fraction` of all queries (at least one per quote length)."""
    from retrieval.bm25 import BM25Index, cached_term_counts, tokenize_all
    from retrieval.ranking import tie_break, top_ranked

    sets = max(len(QUOTE_LENGTHS), round(fraction * RELIC_BOOKS * len(QUOTE_LENGTHS)))
    per_set = queries_per_set()
    index_seconds = query_seconds = 0.0
    passages = queries = 0
    for number in range(sets):
        book, length = number // len(QUOTE_LENGTHS), QUOTE_LENGTHS[number % len(QUOTE_LENGTHS)]
        sentences = synthetic_book(sources, book)
        texts = windows(sentences, length)
        query_texts = [text for _, text in masked_queries(sentences, length, per_set, seed=number)]
        seconds, index = timed(lambda texts=texts: BM25Index.from_counts(cached_term_counts(texts, None)))
        index_seconds += seconds
        key = tie_break([str(number) for number in range(len(texts))])
        seconds, _ = timed(
            lambda index=index, query_texts=query_texts, key=key: [
                top_ranked(row[None, :], DEPTH, key) for row in index.scores(tokenize_all(query_texts))
            ]
        )
        query_seconds += seconds
        passages += len(texts)
        queries += len(query_texts)
    all_sets = RELIC_BOOKS * len(QUOTE_LENGTHS)
    return {
        "sets": sets,
        "passages": passages,
        "queries": queries,
        "index_s_per_set": index_seconds / sets,
        "ms_per_query": 1000 * query_seconds / queries,
        "full_relic_s": index_seconds / sets * all_sets + query_seconds / queries * RELIC_QUERIES,
    }


def compare_peers(sources, queries: int, reference_queries: int) -> dict:
    from bm25_speed import per_query_times

    from retrieval.bm25 import tokenize_all

    sentences = synthetic_book(sources, 0)
    query_texts = [text for _, text in masked_queries(sentences, 1, queries, seed=99)]
    return per_query_times(tokenize_all(windows(sentences, 1)), tokenize_all(query_texts), reference_queries)


# --- 3. storing hits --------------------------------------------------------------------------


def measure_hit_storing(rows: int) -> dict:
    """Hits per second through the run writer (binary COPY on Postgres, one executemany elsewhere,
    in a transaction)."""
    from django.db import connection

    from retrieval.models import Collection, Hit, Passage, Query, Run
    from retrieval.services.run_writer import RunWriter
    from retrieval.services.runs import create_run, get_or_create_retriever

    collection = Collection.objects.create(name=f"hits-{time.time_ns()}", kind=Collection.Kind.BEIR)
    passages = Passage.objects.bulk_create(
        [Passage(collection=collection, external_id=f"p{i}", text="x", ordinal=i) for i in range(DEPTH)]
    )
    query_count = max(1, rows // DEPTH)
    queries = Query.objects.bulk_create(
        [Query(collection=collection, external_id=f"q{i}", text="x", ordinal=i) for i in range(query_count)],
        batch_size=5000,
    )
    run = create_run(collection, get_or_create_retriever("bm25"), depth=DEPTH)
    query_ids = np.array([query.pk for query in queries], dtype=np.int64)
    passage_ids = np.tile(np.array([passage.pk for passage in passages], dtype=np.int64), (len(queries), 1))
    scores = np.tile(1.0 / np.arange(1, DEPTH + 1), (len(queries), 1))
    writer = RunWriter(run.pk)
    seconds, _ = timed(lambda: (writer.add_ranked(query_ids, passage_ids, scores), writer.flush()))
    stored = Hit.objects.filter(run=run).count()
    Run.objects.filter(pk=run.pk).delete()
    return {"vendor": connection.vendor, "hits": stored, "seconds": seconds, "hits_per_s": stored / seconds}


def database_bytes() -> int | None:
    from django.conf import settings
    from django.db import connection

    if connection.vendor == "sqlite":
        return Path(settings.DATABASES["default"]["NAME"]).stat().st_size
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return cursor.fetchone()[0]
    return None


def measure_postgres(url: str, rows: int) -> dict:
    environment = {**os.environ, "DATABASE_URL": url}
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=environment, check=True)
    result = subprocess.run(
        [sys.executable, __file__, "--hits-only", str(rows)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure_run() -> dict:
    from retrieval.models import Collection
    from retrieval.services.runs import create_run, execute_run, get_or_create_retriever

    run = execute_run(create_run(Collection.objects.get(name="paper"), get_or_create_retriever("bm25"), depth=DEPTH))
    hits = run.hits.count()
    return {"queries": run.query_results.count(), "hits": hits, "seconds": run.seconds}


# --- 4. dense ---------------------------------------------------------------------------------


def measure_dense(sources, passages: int) -> dict:
    from retrieval.dense import default_model, encode, load_model

    texts = windows(synthetic_book(sources, 0), 1)[:passages]
    model = load_model(default_model())
    model.encode(texts[:8], show_progress_bar=False)  # warm-up
    theirs, _ = timed(lambda: model.encode(texts, batch_size=64, show_progress_bar=False))
    ours, _ = timed(lambda: encode(model, texts, batch_size=64))
    every_window = sum(len(synthetic_book(sources, book)) - n + 1 for book in range(RELIC_BOOKS) for n in QUOTE_LENGTHS)
    rate = passages / ours
    return {
        "device": model.device.type,
        "passages": passages,
        "ours_per_s": rate,
        "sentence_transformers_per_s": passages / theirs,
        "ratio": theirs / ours,
        "full_relic_windows": every_window,
        "full_relic_s": (every_window + RELIC_QUERIES) / rate,
    }


# --- 6. proxy study ---------------------------------------------------------------------------


def command_seconds(name: str, *args) -> float:
    from django.core.management import call_command

    seconds, _ = timed(lambda: call_command(name, *map(str, args), stdout=io.StringIO()))
    return seconds


def measure_study(items: int, scratch: Path) -> dict:
    from annotation.models import ItemCandidate
    from tests.factories import make_bulk_proxy_study

    create_s, study = timed(lambda: make_bulk_proxy_study(items, with_judgments=False, seed=5))
    rng = np.random.default_rng(6)
    shown: dict[int, list[str]] = {}
    for item_id, passage in (
        ItemCandidate.objects.filter(item__study=study)
        .order_by("item_id", "position")
        .values_list("item_id", "passage__external_id")
        .iterator(5000)
    ):
        shown.setdefault(item_id, []).append(passage)
    path = scratch / "judgments.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for item_id, passages in shown.items():
            for annotator in range(study.judgments_per_item):
                choice = passages[int(rng.integers(len(passages)))]
                out.write(json.dumps({"item": item_id, "annotator": f"expert{annotator}", "choice": choice}) + "\n")
    return {
        "items": items,
        "judgments": items * study.judgments_per_item,
        "create_s": create_s,
        "import_judgments_s": command_seconds("import_judgments", study.pk, path),
        "report_s": command_seconds("study_report", study.pk, "--json"),
        "export_study_s": command_seconds("export_study", study.pk),
        "export_judgments_s": command_seconds("export_judgments", study.pk),
    }


def measure_export(items: int) -> dict:
    from tests.factories import make_bulk_proxy_study

    create_s, study = timed(lambda: make_bulk_proxy_study(items, seed=7))
    return {
        "items": items,
        "create_s": create_s,
        "export_study_s": command_seconds("export_study", study.pk),
        "export_judgments_s": command_seconds("export_judgments", study.pk),
    }


# --- the report ---------------------------------------------------------------------------------


def print_report(figures: dict) -> None:
    imp, bm25, peers = figures["import"], figures["bm25"], figures["peers"]
    print(f"== import (import_relic, {imp['books']} of {RELIC_BOOKS} books, {imp['queries']} queries)")
    print(f"  {imp['seconds']:.1f} s, peak memory {imp['peak_mib']:.0f} MiB (maxrss); {imp['summary']}")
    print(f"  extrapolated to {RELIC_BOOKS} books: {imp['seconds'] * RELIC_BOOKS / imp['books'] / 60:.1f} min")
    print(
        f"== BM25, ours ({bm25['sets']} full-size candidate sets, {bm25['passages']} windows, "
        f"{bm25['queries']} queries = {bm25['queries'] / RELIC_QUERIES:.1%} of RELiC's)"
    )
    print(
        f"  count + index {bm25['index_s_per_set']:.3f} s per set; "
        f"score + top {DEPTH}: {bm25['ms_per_query']:.2f} ms/query"
    )
    print(
        f"  EXTRAPOLATED to full RELiC ({RELIC_BOOKS * len(QUOTE_LENGTHS)} sets, {RELIC_QUERIES} queries, "
        "one process): "
        f"{bm25['full_relic_s'] / 60:.1f} min"
    )
    print(f"== BM25 per query, one set of {peers['passages']} windows x {peers['queries']} queries")
    for name, value in peers["per_query_ms"].items():
        print(f"  {name:<24} {value:9.3f} ms")
    for name, value in peers["ratios"].items():
        print(f"  {name:<34} {value:7.3f}")
    print(
        f"  ours identical to rank_bm25 (first {peers['rank_bm25_queries']} queries): {peers['identical_to_rank_bm25']}"
    )
    print("== hits stored (run writer)")
    for measured in figures["hits"]:
        print(
            f"  {measured['vendor']:<10} {measured['hits']} hits in {measured['seconds']:.2f} s: "
            f"{measured['hits_per_s']:,.0f} hits/s"
        )
    run = figures["run"]
    print(
        f"  end-to-end BM25 run over the imported books (SQLite): {run['queries']} queries, {run['hits']} hits, "
        f"{run['seconds']:.1f} s"
    )
    dense = figures.get("dense")
    if dense:
        print(f"== dense encoding, {dense['device']}, {dense['passages']} windows")
        print(
            f"  ours {dense['ours_per_s']:.1f} passages/s, sentence-transformers "
            f"{dense['sentence_transformers_per_s']:.1f}"
            f" passages/s, ratio {dense['ratio']:.3f}"
        )
        print(
            f"  EXTRAPOLATED: all {dense['full_relic_windows']:,} windows + {RELIC_QUERIES} queries of full RELiC: "
            f"{dense['full_relic_s'] / 3600:.1f} h on this CPU"
        )
    print("== database size")
    for vendor, size in figures["database_bytes"].items():
        print(f"  {vendor:<10} {size / 2**20:.0f} MiB")
    study = figures["study"]
    print(f"== proxy study, {study['items']} items x 3 judgments ({study['judgments']})")
    for key in ("create_s", "import_judgments_s", "report_s", "export_study_s", "export_judgments_s"):
        print(f"  {key[:-2]:<18} {study[key]:7.2f} s")
    export = figures.get("export")
    if export:
        print(f"== export at {export['items']} items (judgments x 3)")
        for key in ("create_s", "export_study_s", "export_judgments_s"):
            print(f"  {key[:-2]:<18} {export[key]:7.2f} s")
    else:
        per_item = (study["export_study_s"] + study["export_judgments_s"]) / study["items"]
        print(
            f"== export at 100K items: EXTRAPOLATED (linear) from {study['items']}: {per_item * 100_000:.0f} s "
            "(measure with --export-items 100000)"
        )


def setup_django(database_url: str | None, scratch: Path) -> dict:
    """Django on `database_url`, by default an SQLite file in `scratch`. An SQLite file that does
    not exist yet starts as a copy of the migrated template (benchmarks/migrated.py), so the
    caller's `migrate` finds nothing to do."""
    database_url = database_url or f"sqlite:///{scratch / 'db.sqlite3'}"
    sqlite_file = Path(database_url.removeprefix("sqlite:///")) if database_url.startswith("sqlite:///") else None
    if sqlite_file is not None and not sqlite_file.exists():
        copy_migrated_sqlite(sqlite_file)
    environment = {
        **os.environ,
        "DATABASE_URL": database_url,
        "MARGINALIA_DATA_DIR": str(scratch / "data"),
        "DJANGO_SETTINGS_MODULE": "marginalia.settings",
        "HF_HUB_OFFLINE": "1",
    }
    os.environ.update(environment)
    import django

    django.setup()
    return environment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--fraction", type=float, default=0.01, help="share of RELiC's queries run through BM25")
    parser.add_argument("--import-books", type=int, default=2)
    parser.add_argument("--import-queries-per-set", type=int, default=20)
    parser.add_argument("--peer-queries", type=int, default=300)
    parser.add_argument("--rank-bm25-queries", type=int, default=5)
    parser.add_argument("--hits", type=int, default=200_000, help="hits stored per database")
    parser.add_argument("--dense-passages", type=int, default=256, help="0 skips dense encoding")
    parser.add_argument("--study-items", type=int, default=10_000)
    parser.add_argument("--export-items", type=int, default=0, help="also build and export a study this large")
    parser.add_argument("--postgres-url", default=None, help="a Postgres DATABASE_URL to measure hits/s on")
    parser.add_argument("--book-sentences", type=int, default=0, help="cut books to N sentences (smoke test)")
    parser.add_argument("--json", action="store_true", help="also print all figures as one JSON object")
    parser.add_argument("--hits-only", type=int, default=0, help=argparse.SUPPRESS)  # child for --postgres-url
    args = parser.parse_args()
    global BOOK_SENTENCES
    BOOK_SENTENCES = args.book_sentences

    scratch = Path(tempfile.mkdtemp(prefix="paper-scale-"))
    try:
        if args.hits_only:
            setup_django(os.environ["DATABASE_URL"], scratch)
            measured = measure_hit_storing(args.hits_only)
            print(json.dumps({**measured, "database_bytes": database_bytes()}))
            return
        environment = setup_django(None, scratch)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        sources = source_sentences(args.data)
        figures = {
            "import": measure_import(sources, args.import_books, args.import_queries_per_set, scratch, environment)
        }
        figures["bm25"] = measure_bm25(sources, args.fraction)
        figures["peers"] = compare_peers(sources, args.peer_queries, args.rank_bm25_queries)
        figures["hits"] = [measure_hit_storing(args.hits)]
        figures["run"] = measure_run()
        figures["database_bytes"] = {"sqlite": database_bytes()}
        if args.postgres_url:
            postgres = measure_postgres(args.postgres_url, args.hits)
            figures["hits"].append(postgres)
            figures["database_bytes"]["postgresql"] = postgres["database_bytes"]
        if args.dense_passages:
            figures["dense"] = measure_dense(sources, args.dense_passages)
        figures["study"] = measure_study(args.study_items, scratch)
        if args.export_items:
            figures["export"] = measure_export(args.export_items)
        print_report(figures)
        if args.json:
            print(json.dumps(figures, default=float))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
