#!/usr/bin/env python
"""How fast label aggregation fits, against crowd-kit measured in the same run on the same frame.

Simulated crowd judgments (the tests' crowd: five good annotators, three spammers, one
adversary; five judgments per item, three labels) are fitted by:
- GLAD: evaluation.glad (crowd-kit's algorithm on arrays) against crowd-kit's GLAD class, the
  reason the platform does not call that class; the results must be identical (checked here).
- MACE: one restart (what evaluation.label_models runs) against crowd-kit's default ten, which
  in crowd-kit 1.4.2 all start from the same seeded draw (checked identical here).
- Dawid-Skene: crowd-kit's, for scale (the platform calls it as it is).
Prints seconds and the ratio peer / ours for each.

Usage, from the project root:
    .venv/bin/python benchmarks/label_aggregation.py [--items 1000] [--seed 0]
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(fit):
    started = time.perf_counter()
    result = fit()
    return result, time.perf_counter() - started


def report(name: str, ours: float, peer: float, identical: bool) -> None:
    print(f"{name:<11} ours {ours:8.2f} s  crowd-kit {peer:8.2f} s  ratio {peer / ours:6.1f}x  identical: {identical}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # crowd-kit's pandas-3 deprecation warnings

    from crowdkit.aggregation import GLAD, MACE, DawidSkene

    from evaluation.glad import fit_glad
    from evaluation.label_models import MACE_RESTARTS, ratings_frame
    from tests.evaluation.simulated_annotators import simulate

    rng = np.random.default_rng(args.seed)
    truth = {item: int(rng.integers(3)) for item in range(args.items)}
    frame = ratings_frame(simulate(truth, [0, 1, 2], per_task=5, seed=args.seed))
    print(f"{args.items} items, {len(frame)} judgments, {frame['worker'].nunique()} annotators")

    ours, ours_seconds = timed(lambda: fit_glad(frame))
    peer, peer_seconds = timed(lambda: GLAD().fit(frame))
    same = ours.probas.equals(peer.probas_.sort_index().sort_index(axis=1)) and ours.alphas.equals(
        peer.alphas_.rename("alpha").reindex(ours.alphas.index)
    )
    report("GLAD", ours_seconds, peer_seconds, same)

    ours, ours_seconds = timed(lambda: MACE(n_restarts=MACE_RESTARTS, random_state=args.seed).fit(frame))
    peer, peer_seconds = timed(lambda: MACE(random_state=args.seed).fit(frame))
    same = np.array_equal(ours.spamming_, peer.spamming_) and ours.probas_.equals(peer.probas_)
    report("MACE", ours_seconds, peer_seconds, same)

    _, seconds = timed(lambda: DawidSkene().fit(frame))
    print(f"Dawid-Skene crowd-kit {seconds:8.2f} s (called as it is)")


if __name__ == "__main__":
    main()
