#!/usr/bin/env python
"""Dense encoding and training throughput.

Encode mode (default), on the passages of BIRCO's RELiC dev corpus (the first --passages):
  - sentence-transformers' own `encode` vs our pipeline (`retrieval.dense.encode`: token-length
    sorted batches, fp16 autocast on CUDA) on the same texts: passages/s and their ratio (goal
    >= 0.9), plus the largest difference between the two embeddings;
  - the embedding cache: a DenseScorer over those passages stored in a scratch database, run
    twice with a fresh scorer each time (as two runs would): first = encode and write, second =
    read only; prints both times and the speed-up.
Runs alternate and the best of --repeats is kept, since other processes may share the CPUs.

Train mode (--train): fine-tunes the default model for --steps steps on (query, gold passage)
pairs of the same data and prints training samples/s and, on CUDA, peak GPU memory.

Usage, from the project root:
    .venv/bin/python benchmarks/dense_encode.py [--data ../shared/data] [--passages 512] [--repeats 3]
    .venv/bin/python benchmarks/dense_encode.py --train [--steps 20] [--batch-size 16]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def read_texts(path: Path) -> dict[str, str]:
    """`_id` -> `text` of a BEIR jsonl file, in file order."""
    with open(path, encoding="utf-8") as lines:
        return {row["_id"]: row["text"] for row in map(json.loads, lines)}


def timed(function) -> tuple[float, object]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def report_encoding(texts: list[str], repeats: int, batch_size: int) -> None:
    from retrieval.dense import default_model, encode, load_model

    model = load_model(default_model())
    device = model.device.type
    model.encode(texts[:batch_size], batch_size=batch_size, show_progress_bar=False)  # warm-up
    theirs_best = ours_best = float("inf")
    for _ in range(repeats):  # alternate, so a busy moment does not favour one side
        theirs_time, theirs = timed(lambda: model.encode(texts, batch_size=batch_size, show_progress_bar=False))
        ours_time, ours = timed(lambda: encode(model, texts, batch_size=batch_size))
        theirs_best, ours_best = min(theirs_best, theirs_time), min(ours_best, ours_time)
    print(f"{len(texts)} passages, batch {batch_size}, device {device}, best of {repeats}")
    print(f"sentence-transformers encode:  {len(texts) / theirs_best:9.1f} passages/s")
    print(
        f"ours (retrieval.dense.encode): {len(texts) / ours_best:9.1f} passages/s   "
        f"ratio {theirs_best / ours_best:.3f} (goal >= 0.9)"
    )
    print(f"largest embedding difference:  {np.abs(np.asarray(ours) - np.asarray(theirs)).max():.2e}")


def report_cache(texts: list[str]) -> None:
    from retrieval.dense import DenseScorer
    from retrieval.models import Collection, Passage, Retriever

    collection = Collection.objects.create(name="dense-benchmark", kind=Collection.Kind.BEIR)
    Passage.objects.bulk_create(
        [Passage(collection=collection, external_id=f"p{i}", text=text, ordinal=i) for i, text in enumerate(texts)]
    )
    passages = list(collection.passages.order_by("ordinal"))
    retriever = Retriever.objects.create(name="dense default", kind=Retriever.Kind.DENSE)
    times = [timed(lambda: DenseScorer(retriever).score(["a query"], passages))[0] for _ in range(2)]
    print(f"DenseScorer, first run (encode + write cache): {times[0]:8.3f} s")
    print(f"DenseScorer, second run (cache only):          {times[1]:8.3f} s   speed-up {times[0] / times[1]:.1f}x")


def report_training(folder: Path, steps: int, batch_size: int) -> None:
    from retrieval.models import Collection
    from retrieval.training import TrainingPair, train_retriever

    queries, corpus = read_texts(folder / "queries.jsonl"), read_texts(folder / "corpus.jsonl")
    with open(folder / "qrels.tsv", encoding="utf-8") as lines:
        rows = [line.rstrip("\n").split("\t") for line in lines][1:]
    pairs = [TrainingPair(queries[q], corpus[c], group="relic-dev") for q, c, score in rows if int(score) > 0]
    collection = Collection.objects.create(name="dense-training-benchmark", kind=Collection.Kind.BEIR)
    epochs = -(-steps * batch_size // len(pairs))
    summary = train_retriever(
        collection, name="benchmark", pairs=pairs, batch_size=batch_size, epochs=epochs, max_steps=steps
    )
    print(f"{summary['steps']} steps of {batch_size} pairs ({len(pairs)} pairs), device {summary['device']}")
    print(f"training: {summary['samples_per_second']:.1f} samples/s")
    if "peak_gpu_memory_bytes" in summary:
        print(f"peak GPU memory: {summary['peak_gpu_memory_bytes'] / 2**30:.2f} GiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--passages", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None, help="default: 64 encoding, 16 training")
    parser.add_argument("--train", action="store_true", help="measure training instead of encoding")
    parser.add_argument("--steps", type=int, default=20, help="training steps (--train)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="dense-benchmark-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'db.sqlite3'}"
    os.environ["MARGINALIA_DATA_DIR"] = str(scratch / "data")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    folder = args.data / "birco-relic-dev"
    try:
        if args.train:
            report_training(folder, args.steps, args.batch_size or 16)
        else:
            texts = list(read_texts(folder / "corpus.jsonl").values())[: args.passages]
            report_encoding(texts, args.repeats, args.batch_size or 64)
            report_cache(texts)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
