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

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

import numpy as np
import pandas as pd
from django.db.models import TextField
from django.db.models.functions import Cast

from annotation.models import Study
from annotation.provenance import as_key
from annotation.selectors import counted_judgments
from annotation.services.labels import study_schema
from evaluation.selectors import driver_rows, proxy_items, shown_items, usernames

NO_GOLD = -1


class Unit(NamedTuple):
    """What one label is about: `key` is the task name the models see (the item id, or
    "item:position" for a multi-select paragraph); `position` the paragraph's display position
    (multi-select) or None. A named tuple: a frozen dataclass per item cost a tenth of reading
    100K items' judgments."""

    key: int | str
    item: int
    position: int | None
    gold: int  # the known label, NO_GOLD when none (label studies: hidden gold items are apart)


@dataclass(frozen=True)
class StudyRatings:
    """Parallel arrays, one entry per rating, in submission order (time, then judgment id):
    `unit` (index into `units`), `annotator` (index into `annotators`), `label`, `submitted_at`
    (UTC datetime64) and `judgment` (its id). `answers`: item id -> the answer keys of every
    counted judgment of the item, those without an answer included (None), read with the
    ratings: what annotation.provenance.counted_answers reads, for the label sources."""

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
    answers: dict[int, list[Hashable]]

    def columns(self) -> tuple[list[str], list[int | str], list[int]]:
        """Each rating's annotator, unit key and label, as three lists: label_models' input,
        which builds crowd-kit's frame a column at a time (a tuple per rating cost more than
        fitting the majority vote at 300K ratings)."""
        keys = [unit.key for unit in self.units]
        workers = [self.annotators[a] for a in self.annotator.tolist()]
        return workers, [keys[u] for u in self.unit.tolist()], self.label.tolist()

    @property
    def first_of_judgment(self) -> np.ndarray:
        """Per rating: whether it is its judgment's first (a multi-select judgment rates each
        paragraph of its item, and its ratings are consecutive: they share a time and an id)."""
        return np.r_[True, self.judgment[1:] != self.judgment[:-1]] if len(self.judgment) else np.zeros(0, bool)

    @property
    def judgments(self) -> int:
        """How many judgments the ratings come from."""
        return int(np.count_nonzero(self.first_of_judgment))

    @property
    def label_codes(self) -> np.ndarray:
        """Each rating's label as an index into `values`."""
        return np.searchsorted(np.asarray(self.values), self.label)


# A judgment's submission time as the database writes it in ISO 8601 (UTC: SQLite stores it so, and
# Django's Postgres connections speak UTC): Django's SQLite converter parsed one datetime per
# judgment, a third of reading 300K of them, and numpy took ten times as long as pandas from
# datetime objects.
SUBMITTED_AT = Cast("submitted_at", TextField())


def study_ratings(study: Study) -> StudyRatings:
    """The study's counted judgments as ratings (see the module docstring)."""
    if study.kind == Study.Kind.PROXY:
        return _proxy_ratings(study)
    return _label_ratings(study)


def _ordered(
    study: Study,
    kind: str,
    values: list[int],
    units: list[Unit],
    judgment: Sequence[int],
    submitted_at: Sequence[str],
    unit: Sequence[int],
    annotator: Sequence[int],
    label: Sequence[int],
    answers: dict[int, list[Hashable]],
) -> StudyRatings:
    """Ratings from parallel columns (judgment id, submission time, unit index, annotator id,
    label), put in submission order (time, then judgment id, then as given) with the annotators
    named. The times come as SUBMITTED_AT's text, parsed by pandas at once."""
    times = pd.to_datetime(list(submitted_at), utc=True, format="ISO8601").tz_localize(None)
    times = np.asarray(times, dtype="datetime64[us]")
    judgment = np.asarray(judgment, dtype=np.int64)
    order = np.lexsort((np.arange(len(judgment)), judgment, times))
    annotator_ids, annotator_rows = np.unique(np.asarray(annotator, dtype=np.int64), return_inverse=True)
    named = usernames(annotator_ids.tolist())
    names = tuple(sorted(named.values()))
    code = {name: index for index, name in enumerate(names)}
    annotator_codes = np.array([code[named[pk]] for pk in annotator_ids.tolist()], dtype=np.int64)
    return StudyRatings(
        study=study,
        kind=kind,
        values=values,
        units=units,
        annotators=names,
        unit=np.asarray(unit, dtype=np.int64)[order],
        annotator=annotator_codes[annotator_rows][order],
        label=np.asarray(label, dtype=np.int64)[order],
        submitted_at=times[order],
        judgment=judgment[order],
        answers=answers,
    )


def _proxy_ratings(study: Study) -> StudyRatings:
    items = proxy_items(study)
    units = [Unit(item, item, None, gold) for item, gold in zip(items.ids.tolist(), items.gold.tolist(), strict=True)]
    rows, _ = driver_rows(
        counted_judgments(study)
        .order_by()
        .values_list("pk", SUBMITTED_AT, "item_id", "annotator_id", "choice__position")
    )
    answers: dict[int, list[Hashable]] = defaultdict(list)
    for _, _, item, _, position in rows:
        answers[item].append(position)
    rows = [row for row in rows if row[4] is not None]  # a judgment without a choice rates nothing
    judgment, submitted_at, item, annotator, position = (list(map(itemgetter(column), rows)) for column in range(5))
    values = list(range(max([study.candidates_per_item, *items.candidates.tolist()])))
    unit = items.rows(np.asarray(item, dtype=np.int64))
    return _ordered(study, "proxy", values, units, judgment, submitted_at, unit, annotator, position, answers)


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
        .values_list("pk", SUBMITTED_AT, "item_id", "annotator_id", "label", "selections")
    )
    rows = []
    answers: dict[int, list[Hashable]] = defaultdict(list)
    for pk, at, item, annotator, label, selections in judgments.iterator(10_000):
        answers[item].append(as_key(selections if multi_select else label))
        for row in units_of_item.get(item, ()):
            if multi_select:
                rows.append((pk, at, row, annotator, int(units[row].position in (selections or ()))))
            elif label is not None:
                rows.append((pk, at, row, annotator, int(label)))
    values = [0, 1] if multi_select else [int(value) for value in schema["values"]]
    columns = (list(map(itemgetter(column), rows)) for column in range(5))
    return _ordered(study, "multi_select" if multi_select else "labels", values, units, *columns, answers)
