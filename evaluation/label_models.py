"""Label aggregation by annotator competence: one entry point, `aggregate`, that takes judgments as
(annotator, task, label) triples and returns each task's label and posterior and each
annotator's competence, by majority vote, Dawid-Skene, MACE or GLAD.

The models are the field's maintained implementations (crowd-kit 1.4.2): `MajorityVote`,
`DawidSkene` and `MACE` are called as they are; GLAD is `evaluation.glad`, crowd-kit's algorithm
repeated on arrays because crowd-kit's own class took minutes on a few thousand judgments (that
module says how much and why, and the tests hold it to crowd-kit's results). Each model gets
the triples as crowd-kit's `task`, `worker`, `label` frame, rows sorted by task then worker, so
the same judgments always make the same frame.

What each competence is, as a number in [0, 1]:
- majority: the share of the annotator's labels that equal the majority label (crowd-kit's
  MajorityVote `skills_`); a tie goes to the lowest label, as everywhere in the platform
  (crowd-kit's own tie-break follows its column order, so its labels are not used).
- dawid-skene: the annotator's accuracy under the fitted model, sum over true labels c of
  prior(c) x P(says c | truth c); the confusion matrix P(says k | truth c) is reported beside it.
- mace: the posterior probability that the annotator is not spamming (1 - crowd-kit's spamming
  probability); what they answer when spamming is reported as their `strategy`.
- glad: the model's probability that the annotator labels the items they judged correctly, the
  mean over those items of sigmoid(alpha x exp(beta)); alpha (ability) is reported beside it.

Labels are categories to every model here: a graded scale's order is not used. Seeds: MACE
draws its starting point from `seed`. crowd-kit 1.4.2 seeds every one of MACE's restarts with
that same seed, so its ten default restarts repeat one start ten times (tested: the same
result); one restart is run. Dawid-Skene (majority start) and GLAD (alpha = beta = 1) have no
random start. Data with fewer than two distinct labels has nothing to weigh: every task gets
that label with probability 1 and every annotator competence 1, whatever the model.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from crowdkit.aggregation import MACE, DawidSkene, MajorityVote
from scipy.special import expit

from evaluation.aggregates import LABEL_METHODS
from evaluation.glad import fit_glad
from retrieval.errors import InputError

MACE_RESTARTS = 1  # see the module docstring: more restarts repeat the same start in crowd-kit 1.4.2


@dataclass(frozen=True)
class Aggregation:
    """A model's answer. `labels` and `posteriors` are keyed by task, `competence` and the
    per-annotator details by annotator; `confusion` (Dawid-Skene only) maps an annotator to
    rows = true label, columns = label given, in the order of `values`."""

    method: str
    values: list
    labels: dict[Hashable, object]
    posteriors: dict[Hashable, dict]
    competence: dict[str, float]
    confusion: dict[str, list[list[float]]] | None = None
    annotator_details: dict[str, dict] = field(default_factory=dict)
    task_details: dict[Hashable, dict] = field(default_factory=dict)


def ratings_frame(triples: Iterable[tuple[str, Hashable, object]]) -> pd.DataFrame:
    """crowd-kit's input: one row per judgment with `task`, `worker`, `label`, sorted by task then
    worker (tasks and labels must sort among themselves)."""
    return _sorted_frame(pd.DataFrame(list(triples), columns=["worker", "task", "label"])[["task", "worker", "label"]])


def columns_frame(workers: list[str], tasks: list[Hashable], labels: list) -> pd.DataFrame:
    """ratings_frame of the triples given as their three columns, without a tuple per judgment."""
    return _sorted_frame(
        pd.DataFrame({"task": tasks, "worker": workers, "label": labels}, dtype=None if tasks else object)
    )


def _sorted_frame(frame: pd.DataFrame) -> pd.DataFrame:
    duplicated = frame.duplicated(["task", "worker"])
    if duplicated.any():
        row = frame[duplicated].iloc[0]
        raise ValueError(f"annotator {row.worker!r} labelled task {_plain(row.task)!r} twice")
    return frame.sort_values(["task", "worker"], kind="stable").reset_index(drop=True)


def aggregate(
    triples: Iterable[tuple[str, Hashable, object]], method: str, *, seed: int = 0, values: Iterable | None = None
) -> Aggregation:
    """Every task's label, posterior over `values` (default: the labels given) and every
    annotator's competence under `method`."""
    _require(method)
    return aggregate_frame(ratings_frame(triples), method, seed=seed, values=values)


def aggregate_frame(frame: pd.DataFrame, method: str, *, seed: int = 0, values: Iterable | None = None) -> Aggregation:
    """aggregate on a ratings_frame (or columns_frame)."""
    _require(method)
    values = sorted(set(frame["label"]) | set(values or ()))
    if frame["label"].nunique() < 2:
        return _unanimous(frame, method, values)
    with warnings.catch_warnings():
        # crowd-kit 1.4.2 calls pandas with keywords pandas 3 deprecates (inplace=, copy=): noise.
        warnings.filterwarnings("ignore", module=r"crowdkit\.")
        warnings.filterwarnings("ignore", message=r".*(inplace|copy) keyword", category=Warning)
        return FITTERS[method](frame, values, seed)


def _require(method: str) -> None:
    if method not in LABEL_METHODS:
        raise InputError(f"unknown method {method!r}: use one of {', '.join(LABEL_METHODS)}", field="method")


def _posteriors(probas: pd.DataFrame, values: list) -> dict[Hashable, dict]:
    """task -> {value: probability} over every value (0 for a label nobody gave)."""
    table = probas.reindex(columns=values, fill_value=0.0).astype(float)
    return {task: dict(zip(values, row)) for task, row in zip(table.index, table.to_numpy().tolist(), strict=True)}


def _labels(series: pd.Series) -> dict[Hashable, object]:
    return dict(zip(series.index, map(_plain, series.tolist()), strict=True))


def _plain(value):
    """numpy scalars as Python numbers, so payloads serialise to JSON."""
    return value.item() if isinstance(value, np.generic) else value


def _unanimous(frame: pd.DataFrame, method: str, values: list) -> Aggregation:
    tasks = sorted(frame["task"].unique())
    label = _plain(frame["label"].iloc[0]) if len(frame) else None
    return Aggregation(
        method=method,
        values=values,
        labels=dict.fromkeys(tasks, label),
        posteriors={task: {value: float(value == label) for value in values} for task in tasks},
        competence=dict.fromkeys(sorted(frame["worker"].unique()), 1.0),
    )


def _majority(frame: pd.DataFrame, values: list, seed: int) -> Aggregation:
    """crowd-kit's vote shares; the label is the most voted one, a tie going to the lowest label
    (crowd-kit breaks ties by its column order, which follows the counts), and the competence
    crowd-kit's `skills_`: the share of the annotator's labels equal to that label."""
    shares = MajorityVote().fit(frame).probas_.reindex(columns=values, fill_value=0.0)
    labels = shares.idxmax(axis=1)  # the first of the tied columns, in ascending label order
    agreed = frame["label"].to_numpy() == labels.reindex(frame["task"]).to_numpy()
    competence = pd.Series(agreed).groupby(frame["worker"].to_numpy()).mean()
    return Aggregation(
        method="majority",
        values=values,
        labels=_labels(labels),
        posteriors=_posteriors(shares, values),
        competence={worker: float(share) for worker, share in competence.items()},
    )


def _dawid_skene(frame: pd.DataFrame, values: list, seed: int) -> Aggregation:
    model = DawidSkene().fit(frame)
    confusion, competence = {}, {}
    priors = model.priors_.reindex(values, fill_value=0.0).to_numpy()
    for worker in sorted(frame["worker"].unique()):
        # errors_.loc[(worker, label given), true label]; a label never given has probability 0.
        block = model.errors_.loc[worker].reindex(index=values, columns=values, fill_value=0.0).to_numpy()
        matrix = block.T  # rows = truth, columns = label given
        confusion[worker] = [[float(cell) for cell in row] for row in matrix]
        competence[worker] = float(priors @ np.diag(matrix))
    return Aggregation(
        method="dawid-skene",
        values=values,
        labels=_labels(model.labels_),
        posteriors=_posteriors(model.probas_, values),
        competence=competence,
        confusion=confusion,
    )


def _mace(frame: pd.DataFrame, values: list, seed: int) -> Aggregation:
    model = MACE(n_restarts=MACE_RESTARTS, random_state=seed % 2**32).fit(frame)  # numpy takes 0..2^32-1
    workers = pd.factorize(frame["worker"])[1]
    labels_given = pd.factorize(frame["label"])[1]
    competence, details = {}, {}
    for row, worker in enumerate(workers):
        # spamming_[worker] = (P(spamming), P(not spamming)); thetas_: what a spammer answers.
        competence[worker] = float(model.spamming_[row, 1])
        strategy = dict(zip(map(_plain, labels_given), map(float, model.thetas_[row]), strict=True))
        details[worker] = {"strategy": {value: strategy.get(value, 0.0) for value in values}}
    return Aggregation(
        method="mace",
        values=values,
        labels=_labels(model.labels_.sort_index()),
        posteriors=_posteriors(model.probas_.sort_index(), values),
        competence=dict(sorted(competence.items())),
        annotator_details=dict(sorted(details.items())),
    )


def _glad(frame: pd.DataFrame, values: list, seed: int) -> Aggregation:
    fit = fit_glad(frame)
    alphas = fit.alphas.reindex(frame["worker"]).to_numpy()
    correct = expit(alphas * np.exp(fit.betas.reindex(frame["task"]).to_numpy()))
    competence = pd.Series(correct).groupby(frame["worker"].to_numpy()).mean()
    return Aggregation(
        method="glad",
        values=values,
        labels=_labels(fit.labels),
        posteriors=_posteriors(fit.probas, values),
        competence={worker: float(value) for worker, value in competence.items()},
        annotator_details={worker: {"ability": float(alpha)} for worker, alpha in sorted(fit.alphas.items())},
        task_details={task: {"log_inverse_difficulty": float(beta)} for task, beta in fit.betas.items()},
    )


FITTERS = {"majority": _majority, "dawid-skene": _dawid_skene, "mace": _mace, "glad": _glad}
