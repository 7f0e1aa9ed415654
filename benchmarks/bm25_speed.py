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
ratios, and whether ours equals rank_bm25 bit for bit. Usage, from the project root:
    .venv/bin/python benchmarks/bm25_speed.py [--data ../shared/data] [--reference-queries N]
        [--masked-queries N]
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
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bm25-speed-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'db.sqlite3'}"
    os.environ["MARGINALIA_DATA_DIR"] = str(scratch / "data")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()

    try:
        report(*load_data(args.data), args.reference_queries, args.masked_queries)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
