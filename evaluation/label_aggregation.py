"""A study's labels by majority vote or by annotator competence (Dawid-Skene, MACE, GLAD): what
`aggregate_labels`, `/api/studies/ID/aggregate/`, the soft-label export and the reports show.

`study_aggregation` gives, for every kind (evaluation.ratings says what a unit and a label are):
`labels` (item id -> the candidate position chosen for proxy items, the scale value for label
items, the selected paragraph positions for multi-select items), `competence` (annotator ->
[0, 1], evaluation.label_models says what each model's number is), `posteriors` (item id ->
label -> probability; multi-select: position -> probability that it is selected),
`changed_from_majority` (items whose label differs from the majority vote's, ties to the lowest
label), and the models' own details (Dawid-Skene's confusion matrices, MACE's spamming
strategies, GLAD's abilities and item difficulties). `labels` holds the model's answer (what is
asked for); adjudications are applied beside it: `adjudicated` (item -> the decided label),
`final_labels` (the decision where there is one, else the model's label), `label_sources` (item
-> where its final label comes from, annotation.provenance: adjudicated, unanimous, single, or
aggregated by `method`) and `sent_back` (items sent back for rework, waiting for a new round).

The seed (MACE's random start) is the study's seed unless one is given, so the same judgments
give the same labels on every call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from annotation.models import Item, Study
from annotation.provenance import (
    ADJUDICATED,
    DEFAULT_METHOD,
    LABEL_SOURCES,
    adjudicated_keys,
    item_labels,
    label_source,
    rework_counts,
)
from evaluation.aggregates import LABEL_METHODS
from evaluation.bulk import collection_paused
from evaluation.label_models import Aggregation, aggregate_frame, columns_frame
from evaluation.ratings import StudyRatings, study_ratings
from evaluation.selectors import item_texts
from retrieval.errors import InputError

# How many items a report lists where a model and the majority disagree (all are counted).
REPORT_CHANGED_ITEMS = 100


def require_method(method: str) -> str:
    if method not in LABEL_METHODS:
        raise InputError(f"unknown method {method!r}: use one of {', '.join(LABEL_METHODS)}", field="method")
    return method


def fit(ratings: StudyRatings, method: str, seed: int) -> Aggregation:
    require_method(method)
    return aggregate_frame(columns_frame(*ratings.columns()), method, seed=seed, values=ratings.values)


class ItemView:
    """A unit-level aggregation read per item, in study order: `labels` (item id -> label) and
    `posteriors` (item id -> posterior) of every item whose units the model labelled. A
    multi-select item's label is the positions of its paragraphs labelled 1, its posterior each
    paragraph's probability of being selected; any other item has one unit, keyed by its id.
    Built once as two dicts: a method call per item and question cost a tenth of the routes."""

    def __init__(self, ratings: StudyRatings, aggregation: Aggregation):
        labels, posteriors = aggregation.labels, aggregation.posteriors
        if ratings.kind != "multi_select":
            items = [unit.key for unit in ratings.units if unit.key in labels]
            self.labels = {item: labels[item] for item in items}
            self.posteriors = {item: posteriors[item] for item in items}
            return
        units_of_item: dict[int, list] = {}
        for unit in ratings.units:
            if unit.key in labels:
                units_of_item.setdefault(unit.item, []).append(unit)
        self.labels = {
            item: [unit.position for unit in units if labels[unit.key] == 1] for item, units in units_of_item.items()
        }
        self.posteriors = {
            item: {unit.position: posteriors[unit.key][1] for unit in units} for item, units in units_of_item.items()
        }


def changed_items(view: ItemView, majority_view: ItemView) -> list[int]:
    """Items (in study order) whose label in `view` differs from the majority vote's."""
    majority = majority_view.labels
    return [item for item, label in view.labels.items() if label != majority[item]]


def _as_label(key):
    """An answer key as this payload writes labels (a multi-select item's positions as a list)."""
    return list(key) if isinstance(key, tuple) else key


@dataclass(frozen=True)
class Provenance:
    """The adjudications beside a fitted view: decided labels, final labels, their sources and
    the items waiting for a new round."""

    adjudicated: dict[int, object]
    final: dict[int, object]
    sources: dict[int, str]
    sent_back: list[int]


def provenance(ratings: StudyRatings, view: ItemView) -> Provenance:
    study = ratings.study
    answers, decided, reworks = ratings.answers, adjudicated_keys(study), rework_counts(study)
    final, sources = {}, {}
    for item, label in view.labels.items():
        key = tuple(label) if isinstance(label, list) else label
        final[item] = _as_label(decided.get(item, key))
        sources[item] = label_source(answers.get(item, []), key, adjudicated=item in decided)
    for item, key in decided.items():
        final.setdefault(item, _as_label(key))
        sources.setdefault(item, ADJUDICATED)
    waiting = sorted(item for item in reworks if not answers.get(item) and item not in decided)
    return Provenance({item: _as_label(key) for item, key in decided.items()}, final, sources, waiting)


def label_sources_section(study: Study) -> dict:
    """For the reports: how many work items' labels come from each source, the majority vote
    aggregating where the judgments differ (ties to the lowest answer)."""
    work = Item.objects.filter(study=study, role=Item.Role.WORK).values_list("pk", flat=True)
    counts = dict.fromkeys(LABEL_SOURCES, 0)
    for label in item_labels(study, work.iterator(10_000)).values():
        counts[label.source] += 1
    return {"method": DEFAULT_METHOD, "items": counts}


@dataclass(frozen=True)
class _Fitted:
    ratings: StudyRatings
    model: Aggregation
    majority: Aggregation
    seed: int


def _fitted(study: Study, method: str, seed: int | None) -> _Fitted:
    """The study's ratings with `method` and the majority vote fitted (the study's seed unless
    one is given)."""
    require_method(method)
    seed = study.seed if seed is None else seed
    ratings = study_ratings(study)
    model = fit(ratings, method, seed)
    return _Fitted(ratings, model, model if method == "majority" else fit(ratings, "majority", seed), seed)


@collection_paused()
def study_aggregation(study: Study, method: str, seed: int | None = None) -> dict:
    """The aggregate_labels payload (see the module docstring)."""
    fitted = _fitted(study, method, seed)
    ratings, model, majority, seed = fitted.ratings, fitted.model, fitted.majority, fitted.seed
    view = ItemView(ratings, model)
    changed = changed_items(view, view if majority is model else ItemView(ratings, majority))
    values = ratings.values
    decided = provenance(ratings, view)
    return {
        "study": study.pk,
        "kind": study.kind,
        "method": method,
        "seed": seed,
        "unit": {"proxy": "item", "labels": "item", "multi_select": "paragraph"}[ratings.kind],
        "values": values,
        "items": len(view.labels),
        "judgments": ratings.judgments,
        "annotators": len(ratings.annotators),
        "labels": view.labels,
        "competence": model.competence,
        "changed_from_majority": len(changed),
        "changed_items": changed,
        "posteriors": view.posteriors,
        "confusion": (
            None
            if model.confusion is None
            else {name: {"values": values, "matrix": matrix} for name, matrix in model.confusion.items()}
        ),
        "annotator_details": model.annotator_details,
        "item_details": {
            item: model.task_details[item]
            for item in view.labels
            if ratings.kind != "multi_select" and item in model.task_details
        },
        "adjudicated": decided.adjudicated,
        "final_labels": decided.final,
        "label_sources": decided.sources,
        "sent_back": decided.sent_back,
    }


def judgments_per_item(ratings: StudyRatings) -> Counter:
    """item id -> how many of its judgments are among the ratings (a multi-select judgment
    rates each paragraph of its item: it counts once)."""
    item_of_unit = np.array([unit.item for unit in ratings.units], dtype=np.int64)
    return Counter(item_of_unit[ratings.unit[ratings.first_of_judgment]].tolist())


def soft_label_rows(study: Study, method: str, seed: int | None = None) -> Iterator[dict]:
    """One JSON-ready row per aggregated item, keeping its whole distribution: `item`, `position`
    (in the study), `query`, `passage` (label kinds) or `candidates` (proxy and multi-select:
    passage ids in display order, which the positions index), `method`, `label`, `majority`,
    `posterior`, `judgments`, and the adjudication beside it: `adjudicated` (the decided label or
    null), `label_source`. Without cyclic garbage collection until the last row is read
    (evaluation.bulk)."""
    with collection_paused():
        fitted = _fitted(study, method, seed)
        ratings = fitted.ratings
        view, majority_view = ItemView(ratings, fitted.model), ItemView(ratings, fitted.majority)
        decided = provenance(ratings, view)
        judged = judgments_per_item(ratings)
        texts = item_texts(study)
        majority, posteriors = majority_view.labels, view.posteriors
        for item, label in view.labels.items():
            position, query, passages = texts[item]
            shown = {"passage": passages[0]} if ratings.kind == "labels" else {"candidates": passages}
            yield {
                "item": item,
                "position": position,
                "query": query,
                **shown,
                "method": method,
                "label": label,
                "majority": majority[item],
                "posterior": {str(key): value for key, value in posteriors[item].items()},
                "judgments": judged[item],
                "adjudicated": decided.adjudicated.get(item),
                "label_source": decided.sources[item],
            }


def report_section(ratings: StudyRatings, fits: dict[str, Aggregation], seed: int) -> dict:
    """For the study report: each fitted method (`fits` holds "majority") with its annotators'
    competence, how many items it labels differently from the majority vote (and the first
    REPORT_CHANGED_ITEMS of them, with both labels and the method's posterior), and for proxy
    items each method's share of items whose label is the gold."""
    majority_view = ItemView(ratings, fits["majority"])
    gold = {unit.item: unit.gold for unit in ratings.units}
    methods = {}
    for method, model in fits.items():
        view = ItemView(ratings, model)
        changed = [] if method == "majority" else changed_items(view, majority_view)
        entry = {
            "competence": model.competence,
            "items": len(view.labels),
            "changed_from_majority": len(changed),
            "changed_items": [
                {
                    "item": item,
                    "majority": majority_view.labels[item],
                    "label": view.labels[item],
                    "posterior": {str(key): value for key, value in view.posteriors[item].items()},
                }
                for item in changed[:REPORT_CHANGED_ITEMS]
            ],
        }
        if ratings.kind == "proxy":
            judged = [item for item in view.labels if gold[item] >= 0]
            entry["accuracy_vs_gold"] = (
                sum(view.labels[item] == gold[item] for item in judged) / len(judged) if judged else None
            )
        methods[method] = entry
    return {"seed": seed, "methods": methods}
