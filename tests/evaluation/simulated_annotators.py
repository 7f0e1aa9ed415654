"""Annotators of known accuracy for testing label aggregation: good ones who give the true label
with their stated probability (else a uniformly drawn wrong one), spammers who answer uniformly
at random, and an adversary who gives the true label with a small probability. Seeded, so a
test sees the same judgments on every run."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

SPAMMER = None  # accuracy of a spammer: none, every answer is uniform over the values

# Five good annotators of different skill, three spammers and one adversary.
CROWD: dict[str, float | None] = {
    "expert": 0.95,
    "careful": 0.9,
    "steady": 0.85,
    "hasty": 0.75,
    "novice": 0.7,
    "spammer-1": SPAMMER,
    "spammer-2": SPAMMER,
    "spammer-3": SPAMMER,
    "adversary": 0.1,
}


def simulate(
    truth: Mapping[Hashable, int],
    values: Sequence[int],
    crowd: Mapping[str, float | None] = CROWD,
    per_task: int = 5,
    seed: int = 0,
) -> list[tuple[str, Hashable, int]]:
    """(annotator, task, label) triples: `per_task` annotators drawn without replacement for each
    task (in the order of `truth`), each answering by their accuracy."""
    rng = np.random.default_rng(seed)
    names = list(crowd)
    triples = []
    for task, true_label in truth.items():
        wrong = [value for value in values if value != true_label]
        for index in sorted(rng.choice(len(names), size=per_task, replace=False).tolist()):
            accuracy = crowd[names[index]]
            if accuracy is SPAMMER:
                label = values[rng.integers(len(values))]
            elif rng.random() < accuracy:
                label = true_label
            else:
                label = wrong[rng.integers(len(wrong))]
            triples.append((names[index], task, int(label)))
    return triples


def true_accuracies(triples, truth: Mapping[Hashable, int]) -> dict[str, float]:
    """Each annotator's share of labels equal to the truth in `triples`."""
    right: dict[str, list[bool]] = {}
    for name, task, label in triples:
        right.setdefault(name, []).append(label == truth[task])
    return {name: float(np.mean(flags)) for name, flags in sorted(right.items())}
