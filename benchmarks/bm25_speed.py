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
and the ratios. Usage, from the project root:
    .venv/bin/python benchmarks/bm25_speed.py [--data ../shared/data] [--reference-queries N]
"""

import argparse
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


def load_data(data: Path) -> tuple[list[str], list[dict]]:
    texts = []
    for book in BOOKS:
        raw = (data / "gutenberg" / f"{book}.txt").read_text(encoding="utf-8-sig")
        texts += [s.strip() for s in re.split(r"(?<=[.!?;:])\s+", raw) if len(s.strip()) > 20]
    queries = [
        json.loads(line)
        for line in (data / "birco-relic-dev" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return texts, queries


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
    from retrieval.services.runs import ranking

    started = time.perf_counter()
    scores = BM25Index(tokenize_all(texts), k1=0.5, b=0.9).scores(tokenize_all(q["text"] for q in queries))
    for row in scores:
        ranking(row, 100)
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


def report(texts: list[str], queries: list[dict], reference_queries: int) -> None:
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
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bm25-speed-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'db.sqlite3'}"
    os.environ["MARGINALIA_DATA_DIR"] = str(scratch / "data")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()

    try:
        report(*load_data(args.data), args.reference_queries)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
