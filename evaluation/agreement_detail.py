"""Agreement as people ask for it: per annotator, per label and over time, for every study kind
(evaluation.ratings says what a unit and a label are; proxy labels are display positions).

Pairs. Every rating is compared with each other annotator's rating of the same unit; a group of
ratings (one annotator's, one day's, one batch's) pools its pairs into one table of (own label,
other's label) counts. From that table: `pairs`, `percent_agreement` (the diagonal's share) and
`cohen_kappa` (unweighted: labels as categories), which equals sklearn's cohen_kappa_score on
the listed pairs. A rating's pairs use every other rating of its unit, whenever it was given, so
a day's figure says how that day's work agrees with the rest of the study.

- per annotator: `vs_others` (their pairs), `vs_gold` (proxy: the work items' gold candidate;
  label studies: the hidden gold items' known answers, single-label scales only),
  `vs_aggregate` (the majority label, their own vote included, and a competence model's label
  of the units they rated).
- per label: `pairs` (the symmetric table of all pairs, rows and columns in `values` order),
  each value's `specific_agreement` 2 n_cc / (n_c. + n_.c), and `vs_majority`: rows = the
  majority label of the unit, columns = the label each annotator gave; proxy studies add
  `vs_gold`: rows = the gold's position, columns = the position chosen (a position preference
  shows as a heavy column).
- over time: `by_day` (UTC dates of submission) and `by_batch` (consecutive runs of
  `batch_size` counted judgments in submission order): each window's judgments, annotators,
  pooled pairs as above, and Krippendorff's alpha over the units whose last rating fell in the
  window (all their ratings).
- study: Krippendorff's alpha over all units with two ratings or more, at the level that fits
  the labels (nominal for positions, yes/no and selections; ordinal for a graded scale): the
  figure an agreement alert compares with the study's threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evaluation import label_agreement as stats
from evaluation.agreement import finite_or_none
from evaluation.label_models import Aggregation
from evaluation.ratings import StudyRatings

DEFAULT_BATCH_SIZE = 100


def alpha_level(ratings: StudyRatings) -> str:
    """Nominal for positions, yes/no labels and selections; ordinal for a graded scale."""
    return "ordinal" if ratings.kind == "labels" and len(ratings.values) > 2 else "nominal"


def kappa_from_table(table: np.ndarray) -> float | None:
    """Cohen's kappa (unweighted) of the pairs counted in a K x K table; None when undefined."""
    total = table.sum()
    if total == 0:
        return None
    observed = np.trace(table) / total
    expected = float(table.sum(axis=1) @ table.sum(axis=0)) / total**2
    return None if expected == 1 else finite_or_none((observed - expected) / (1 - expected))


def _pair_summary(table: np.ndarray) -> dict:
    total = int(table.sum())
    return {
        "pairs": total,
        "percent_agreement": float(np.trace(table) / total) if total else None,
        "cohen_kappa": kappa_from_table(table),
    }


@dataclass(frozen=True)
class _Layout:
    """The ratings as codes: `codes` (each rating's label index), `counts` (units x labels)."""

    codes: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, ratings: StudyRatings) -> _Layout:
        codes = ratings.label_codes
        counts = np.zeros((len(ratings.units), len(ratings.values)), dtype=np.int64)
        np.add.at(counts, (ratings.unit, codes), 1)
        return cls(codes, counts)


def pair_tables(ratings: StudyRatings, layout: _Layout, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """groups x K x K: for each group, (own label, other's label) counts over every pair of one of
    its ratings with another annotator's rating of the same unit."""
    k = len(ratings.values)
    others = layout.counts[ratings.unit] - np.eye(k, dtype=np.int64)[layout.codes]
    tables = np.zeros((n_groups, k, k), dtype=np.int64)
    np.add.at(tables, (groups, layout.codes), others)
    return tables


def alpha_from_counts(counts: np.ndarray, values: list[int], level: str) -> float | None:
    """Krippendorff's alpha of units given as label counts (units x values): alpha depends on how
    often each value was given per unit, not on who gave it."""
    counts = counts[counts.sum(axis=1) >= 2]
    if not len(counts):
        return None
    matrix = np.full((int(counts.sum(axis=1).max()), len(counts)), np.nan)
    for column, row in enumerate(counts):
        labels = np.repeat(values, row)
        matrix[: len(labels), column] = labels
    return finite_or_none(stats.krippendorff_alpha(matrix, level))


def _confusion(rows: np.ndarray, columns: np.ndarray, k: int) -> list[list[int]]:
    table = np.zeros((k, k), dtype=np.int64)
    np.add.at(table, (rows, columns), 1)
    return table.tolist()


def _per_annotator(
    ratings: StudyRatings,
    layout: _Layout,
    aggregates: dict[str, Aggregation],
    gold_pairs: list[tuple[str, int, int]],
) -> dict:
    k, names = len(ratings.values), ratings.annotators
    tables = pair_tables(ratings, layout, ratings.annotator, len(names))
    index = {value: code for code, value in enumerate(ratings.values)}
    keys = [unit.key for unit in ratings.units]
    gold = np.array([unit.gold for unit in ratings.units], dtype=np.int64)
    section = {}
    for code, name in enumerate(names):
        mine = ratings.annotator == code
        entry = {"judgments": int(mine.sum()), "vs_others": _pair_summary(tables[code])}
        if ratings.kind == "proxy":
            with_gold = mine & (gold[ratings.unit] >= 0)
            given, truth = layout.codes[with_gold], gold[ratings.unit[with_gold]]
            entry["vs_gold"] = _vs_reference(given, truth, k)
        else:
            given_expected = [(index[given], index[expected]) for who, given, expected in gold_pairs if who == name]
            entry["vs_gold"] = _vs_reference(
                np.array([g for g, _ in given_expected], dtype=np.int64),
                np.array([e for _, e in given_expected], dtype=np.int64),
                k,
            )
        entry["vs_aggregate"] = {}
        for method, aggregation in aggregates.items():
            units = ratings.unit[mine]
            reference = np.array([index[aggregation.labels[keys[unit]]] for unit in units.tolist()], dtype=np.int64)
            entry["vs_aggregate"][method] = _vs_reference(layout.codes[mine], reference, k)
        section[name] = entry
    return section


def _vs_reference(given: np.ndarray, reference: np.ndarray, k: int) -> dict:
    """Agreement of an annotator's labels with reference labels of the same units: share equal and
    Cohen's kappa of the two label lists."""
    table = np.zeros((k, k), dtype=np.int64)
    np.add.at(table, (given, reference), 1)
    return {
        "units": len(given),
        "agreement": float(np.mean(given == reference)) if len(given) else None,
        "cohen_kappa": kappa_from_table(table),
    }


def _per_label(ratings: StudyRatings, layout: _Layout, majority: Aggregation, gold_pairs) -> dict:
    k = len(ratings.values)
    pairs = pair_tables(ratings, layout, np.zeros(len(ratings.unit), dtype=np.int64), 1)[0]
    index = {value: code for code, value in enumerate(ratings.values)}
    keys = [unit.key for unit in ratings.units]
    majority_codes = np.array([index[majority.labels[keys[unit]]] for unit in ratings.unit.tolist()], dtype=np.int64)
    vs_majority = np.array(_confusion(majority_codes, layout.codes, k))
    section = {
        "values": ratings.values,
        "pairs": pairs.tolist(),
        "vs_majority": vs_majority.tolist(),
        "labels": {},
    }
    for code, value in enumerate(ratings.values):
        shared = pairs[code].sum() + pairs[:, code].sum()
        section["labels"][str(value)] = {
            "given": int(vs_majority[:, code].sum()),
            "majority": int(vs_majority[code].sum()),
            "specific_agreement": float(2 * pairs[code, code] / shared) if shared else None,
            # Of the ratings that gave this value, the share on units whose majority is this value; and
            # of the ratings of units whose majority is this value, the share that gave it.
            "precision_vs_majority": (
                float(vs_majority[code, code] / vs_majority[:, code].sum()) if vs_majority[:, code].sum() else None
            ),
            "recall_vs_majority": (
                float(vs_majority[code, code] / vs_majority[code].sum()) if vs_majority[code].sum() else None
            ),
        }
    if ratings.kind == "proxy":
        gold = np.array([unit.gold for unit in ratings.units], dtype=np.int64)[ratings.unit]
        known = gold >= 0
        section["vs_gold"] = _confusion(gold[known], layout.codes[known], k)
    elif gold_pairs:
        section["vs_gold"] = _confusion(
            np.array([index[expected] for _, _, expected in gold_pairs], dtype=np.int64),
            np.array([index[given] for _, given, _ in gold_pairs], dtype=np.int64),
            k,
        )
    return section


def _windows(ratings: StudyRatings, layout: _Layout, groups: np.ndarray, n_groups: int, level: str) -> list[dict]:
    """Each window's judgments, annotators, pooled pairs and alpha over the units it completed.
    `groups` never decreases along the ratings (windows are runs of time), so each window is a
    slice of them."""
    tables = pair_tables(ratings, layout, groups, n_groups)
    starts = ratings.first_of_judgment
    bounds = np.searchsorted(groups, np.arange(n_groups + 1))
    last_group = np.full(len(ratings.units), -1, dtype=np.int64)
    last_group[ratings.unit] = groups  # ratings are in submission order: the last write wins
    by_completion = np.argsort(last_group, kind="stable")
    completion_bounds = np.searchsorted(last_group[by_completion], np.arange(n_groups + 1))
    rows = []
    for group in range(n_groups):
        window = slice(bounds[group], bounds[group + 1])
        completed = layout.counts[by_completion[completion_bounds[group] : completion_bounds[group + 1]]]
        rows.append(
            {
                "judgments": int(starts[window].sum()),
                "annotators": len(np.unique(ratings.annotator[window])),
                "first": _iso(ratings.submitted_at[window].min()),
                "last": _iso(ratings.submitted_at[window].max()),
                **_pair_summary(tables[group]),
                "completed_units": len(completed),
                "krippendorff_alpha": alpha_from_counts(completed, ratings.values, level),
            }
        )
    return rows


def _iso(moment: np.datetime64) -> str:
    return f"{np.datetime_as_string(moment, unit='s')}Z"


def _over_time(ratings: StudyRatings, layout: _Layout, batch_size: int, level: str) -> dict:
    if not len(ratings.unit):
        return {"batch_size": batch_size, "alpha_level": level, "by_day": [], "by_batch": []}
    days, day_groups = np.unique(ratings.submitted_at.astype("datetime64[D]"), return_inverse=True)
    # Batches count judgments: a multi-select judgment is one rating per paragraph, given in a row.
    batch_groups = (np.cumsum(ratings.first_of_judgment) - 1) // batch_size
    by_day = _windows(ratings, layout, day_groups, len(days), level)
    for day, row in zip(days, by_day, strict=True):
        row["day"] = str(day)
    by_batch = _windows(ratings, layout, batch_groups, int(batch_groups.max()) + 1, level)
    for number, row in enumerate(by_batch):
        row["batch"] = number + 1
    return {"batch_size": batch_size, "alpha_level": level, "by_day": by_day, "by_batch": by_batch}


def study_agreement(ratings: StudyRatings, layout: _Layout | None = None) -> dict:
    """Krippendorff's alpha over every unit with two ratings or more, at `alpha_level`."""
    layout = layout or _Layout.of(ratings)
    level = alpha_level(ratings)
    return {
        "measure": "krippendorff_alpha",
        "level": level,
        "value": alpha_from_counts(layout.counts, ratings.values, level),
        "units": int((layout.counts.sum(axis=1) >= 2).sum()),
    }


def annotator_agreement(ratings: StudyRatings, layout: _Layout | None = None) -> dict[str, dict]:
    """Each annotator's pooled pairs with the others (`pairs`, `percent_agreement`, `cohen_kappa`)."""
    layout = layout or _Layout.of(ratings)
    tables = pair_tables(ratings, layout, ratings.annotator, len(ratings.annotators))
    return {name: _pair_summary(tables[code]) for code, name in enumerate(ratings.annotators)}


def agreement_detail(
    ratings: StudyRatings,
    aggregates: dict[str, Aggregation],
    gold_pairs: list[tuple[str, int, int]] = (),
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> dict:
    """The report's `agreement_detail` section (see the module docstring). `aggregates` holds at
    least "majority"; `gold_pairs` are (annotator, label given, expected label) of a label
    study's hidden gold items."""
    if batch_size < 1 or not math.isfinite(batch_size):
        raise ValueError("batch_size must be at least 1")
    layout = _Layout.of(ratings)
    return {
        "values": ratings.values,
        "study": study_agreement(ratings, layout),
        "annotators": _per_annotator(ratings, layout, aggregates, list(gold_pairs)),
        "labels": _per_label(ratings, layout, aggregates["majority"], list(gold_pairs)),
        "over_time": _over_time(ratings, layout, batch_size, alpha_level(ratings)),
    }
