"""A study's counted judgments as ratings: who gave which label to which unit, and when. What label
aggregation (evaluation.label_aggregation) and agreement per annotator, label and time
(evaluation.agreement_detail) start from, for every study kind:

- proxy: a unit is an item, the label the display position chosen (0-based), the gold the gold
  candidate's position. Positions are shuffled per item, so a label means "the option shown
  there": a model's confusion matrix over positions shows position preferences, not meaning.
- relevance / quotability: a unit is an item, the label the scale value.
- multi-select quotability: a unit is one paragraph shown in an item, the label 1 when the
  annotator selected it and 0 when not; an item's aggregate is the set of paragraphs whose
  unit label is 1.

Only counted judgments enter (annotation.selectors.counted_judgments: work items, not voided,
annotators blocked with their judgments excluded left out), as in every statistic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from annotation.models import Study
from annotation.selectors import counted_judgments
from annotation.services.labels import study_schema
from evaluation.selectors import proxy_items, shown_items

NO_GOLD = -1


@dataclass(frozen=True)
class Unit:
    """What one label is about: `key` is the task name the models see (the item id, or
    "item:position" for a multi-select paragraph); `position` the paragraph's display position
    (multi-select) or None."""

    key: int | str
    item: int
    position: int | None
    gold: int  # the known label, NO_GOLD when none (label studies: hidden gold items are apart)


@dataclass(frozen=True)
class StudyRatings:
    """Parallel arrays, one entry per rating, in submission order (time, then judgment id):
    `unit` (index into `units`), `annotator` (index into `annotators`), `label`, `submitted_at`
    (UTC datetime64) and `judgment` (its id)."""

    study: Study
    kind: str  # "proxy", "labels" or "multi_select"
    values: list[int]
    units: list[Unit]
    annotators: tuple[str, ...]
    unit: np.ndarray
    annotator: np.ndarray
    label: np.ndarray
    submitted_at: np.ndarray
    judgment: np.ndarray

    def triples(self) -> list[tuple[str, int | str, int]]:
        """(annotator, unit key, label) per rating: label_models' input."""
        keys = [unit.key for unit in self.units]
        return [
            (self.annotators[a], keys[u], int(label))
            for a, u, label in zip(self.annotator.tolist(), self.unit.tolist(), self.label.tolist(), strict=True)
        ]

    @property
    def label_codes(self) -> np.ndarray:
        """Each rating's label as an index into `values`."""
        return np.searchsorted(np.asarray(self.values), self.label)


def study_ratings(study: Study) -> StudyRatings:
    """The study's counted judgments as ratings (see the module docstring)."""
    if study.kind == Study.Kind.PROXY:
        return _proxy_ratings(study)
    return _label_ratings(study)


def _ordered(rows: list[tuple], kind: str, study: Study, values: list[int], units: list[Unit]) -> StudyRatings:
    """Ratings from (judgment id, submitted_at, unit index, annotator name, label) rows."""
    rows.sort(key=lambda row: (row[1], row[0]))
    names = tuple(sorted({row[3] for row in rows}))
    code = {name: index for index, name in enumerate(names)}
    return StudyRatings(
        study=study,
        kind=kind,
        values=values,
        units=units,
        annotators=names,
        unit=np.fromiter((row[2] for row in rows), dtype=np.int64, count=len(rows)),
        annotator=np.fromiter((code[row[3]] for row in rows), dtype=np.int64, count=len(rows)),
        label=np.fromiter((row[4] for row in rows), dtype=np.int64, count=len(rows)),
        submitted_at=np.array([row[1].replace(tzinfo=None) for row in rows], dtype="datetime64[us]"),
        judgment=np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)),
    )


def _proxy_ratings(study: Study) -> StudyRatings:
    items = proxy_items(study)
    units = [Unit(int(item), int(item), None, int(gold)) for item, gold in zip(items.ids, items.gold, strict=True)]
    index = {unit.item: row for row, unit in enumerate(units)}
    judgments = (
        counted_judgments(study)
        .filter(choice__isnull=False)
        .order_by()
        .values_list("pk", "submitted_at", "item_id", "annotator__username", "choice__position")
    )
    rows = [(pk, at, index[item], name, position) for pk, at, item, name, position in judgments.iterator(10_000)]
    values = list(range(max([study.candidates_per_item, *items.candidates.tolist()])))
    return _ordered(rows, "proxy", study, values, units)


def _label_ratings(study: Study) -> StudyRatings:
    schema = study_schema(study)
    multi_select = schema["multi_select"]
    items = [item for item in shown_items(study) if item.candidates]
    units: list[Unit] = []
    units_of_item: dict[int, list[int]] = {}
    for item in items:
        for candidate in item.candidates if multi_select else item.candidates[:1]:
            key = f"{item.id}:{candidate.position}" if multi_select else item.id
            units_of_item.setdefault(item.id, []).append(len(units))
            units.append(Unit(key, item.id, candidate.position if multi_select else None, NO_GOLD))
    judgments = (
        counted_judgments(study)
        .order_by()
        .values_list("pk", "submitted_at", "item_id", "annotator__username", "label", "selections")
    )
    rows = []
    for pk, at, item, name, label, selections in judgments.iterator(10_000):
        for row in units_of_item.get(item, ()):
            if multi_select:
                rows.append((pk, at, row, name, int(units[row].position in (selections or ()))))
            elif label is not None:
                rows.append((pk, at, row, name, int(label)))
    values = [0, 1] if multi_select else [int(value) for value in schema["values"]]
    return _ordered(rows, "multi_select" if multi_select else "labels", study, values, units)
