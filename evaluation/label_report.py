"""Reports on relevance and quotability studies: agreement at the level the label scale allows,
aggregated labels with their ties, span and rubric agreement, per-annotator statistics, the
share of items judged quotable, and how model scores order the items against the humans.

A *unit* is what one label is about: the single passage of a relevance or quotability item, or,
in the multi-select quotability pilot, each paragraph shown (label 1 = selected, 0 = not), so
the pilot's selections get the same alpha, kappa and majority statistics as yes/no labels.
Only formal work items and counted judgments (`annotation.selectors.counted_judgments`) enter
the statistics; hidden gold judgments feed gold accuracy only.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from django.utils import timezone

from annotation.majority import majority_votes
from annotation.models import Study
from annotation.provenance import DEFAULT_METHOD, label_method, label_source, rework_counts
from annotation.services.labels import study_schema
from evaluation import label_agreement as stats
from evaluation.agreement import CONFIDENCE_LEVEL, finite_or_none
from evaluation.crowd_report import crowd_sections
from evaluation.judge_report import label_judges
from evaluation.label_aggregation import label_sources_section
from evaluation.positions import selection_position_effect
from evaluation.selectors import (
    LabelAnswer,
    ShownCandidate,
    ShownItem,
    adjudicated_answers,
    counted_label_answers,
    gold_outcomes,
    run_scores,
    shown_answers,
    shown_items,
    span_texts,
)
from evaluation.spans import bow_f1, mean_pairwise_span_f1, span_exact_match, text_exact_match
from retrieval.errors import InputError
from retrieval.models import Run

BINARY_LEVELS = ("nominal",)
SCALE_LEVELS = ("nominal", "ordinal", "interval")
KAPPA_WEIGHTS = {"unweighted": None, "linear": "linear", "quadratic": "quadratic"}
MIN_CORRELATION_UNITS = 3
QUOTABLE_RULE = (
    "items with every judgment (or adjudicated); the adjudicated label, else the majority vote with "
    "ties counted as not quotable"
)


@dataclass(frozen=True)
class Unit:
    """One labelled thing: an item's passage, or one paragraph of a multi-select item."""

    item: ShownItem
    candidate: ShownCandidate

    @property
    def key(self) -> tuple[int, int]:
        return self.item.id, self.candidate.position


@dataclass(frozen=True)
class LabelData:
    """A label study's counted answers laid out per unit: what every statistic starts from."""

    study: Study
    schema: dict
    values: list[int]
    items: list[ShownItem]
    answers: list[LabelAnswer]
    units: list[Unit]
    ratings: dict[tuple[int, int], dict[str, int]]  # unit key -> annotator -> label
    adjudicated: dict[tuple[int, int], int]  # unit key -> staff's final label

    @property
    def multi_select(self) -> bool:
        return self.schema["multi_select"]

    def labels(self, unit: Unit) -> list[int]:
        return list(self.ratings[unit.key].values())

    def triples(self) -> list[tuple[str, tuple[int, int], int]]:
        """(annotator, unit, label) for every rating: a reliability matrix's input."""
        return [(annotator, key, label) for key, labels in self.ratings.items() for annotator, label in labels.items()]


def require_label_study(study: Study) -> None:
    if study.kind in (Study.Kind.PROXY, Study.Kind.PREFERENCE):
        raise InputError(
            f"study {study.pk} is a {study.kind} study; this report covers relevance and quotability studies",
            field="study",
        )


def label_data(study: Study) -> LabelData:
    """Units, ratings and adjudications of a relevance or quotability study."""
    require_label_study(study)
    schema = study_schema(study)
    items = [item for item in shown_items(study) if item.candidates]
    answers = counted_label_answers(study)
    multi_select = schema["multi_select"]
    units = [
        Unit(item, candidate)
        for item in items
        for candidate in (item.candidates if multi_select else item.candidates[:1])
    ]
    ratings: dict[tuple[int, int], dict[str, int]] = {unit.key: {} for unit in units}
    units_of_item: dict[int, list[Unit]] = {}
    for unit in units:
        units_of_item.setdefault(unit.item.id, []).append(unit)
    for answer in answers:
        for unit in units_of_item.get(answer.item_id, ()):
            value = _unit_label(unit, answer.label, answer.selections, multi_select)
            if value is not None:
                ratings[unit.key][answer.annotator] = value
    adjudicated = {}
    for item_id, (label, selections) in adjudicated_answers(study).items():
        for unit in units_of_item.get(item_id, ()):
            value = _unit_label(unit, label, selections, multi_select)
            if value is not None:
                adjudicated[unit.key] = value
    values = [0, 1] if multi_select else list(schema["values"])
    return LabelData(study, schema, values, items, answers, units, ratings, adjudicated)


def _unit_label(unit: Unit, label: int | None, selections: Sequence[int], multi_select: bool) -> int | None:
    if multi_select:
        return int(unit.candidate.position in selections)
    return label


# --- agreement ------------------------------------------------------------------------------------


def alpha_levels(values: Sequence[int]) -> tuple[str, ...]:
    """Levels of measurement that fit a scale: a yes/no scale is nominal; a graded or 0-10 scale
    is reported at all three, since whether its steps are equal is the researcher's call."""
    return BINARY_LEVELS if len(values) <= 2 else SCALE_LEVELS


def krippendorff_alphas(triples: Sequence[tuple[Hashable, Hashable, int]], levels: Iterable[str]) -> dict:
    """Krippendorff's alpha at each level from (rater, unit, value) triples; null when undefined."""
    if not triples:
        return dict.fromkeys(levels)
    matrix = stats.reliability_matrix(triples).values
    return {level: finite_or_none(stats.krippendorff_alpha(matrix, level)) for level in levels}


def pairwise_kappas(triples: Sequence[tuple[Hashable, Hashable, int]], values: Sequence[int]) -> dict:
    """Mean pairwise Cohen's kappa over the units each pair of annotators shares: unweighted,
    plus linear and quadratic weights on a scale with more than two values."""
    names = ["unweighted"] if len(values) <= 2 else list(KAPPA_WEIGHTS)
    matrix = stats.reliability_matrix(triples).values if triples else np.empty((0, 0))
    section = {}
    for name in names:
        if matrix.shape[0] < 2:
            section[name] = {"mean": None, "pairs": 0}
            continue
        kappa = stats.mean_pairwise_cohen_kappa(matrix, KAPPA_WEIGHTS[name], labels=list(values))
        section[name] = {"mean": finite_or_none(kappa.mean), "pairs": kappa.pairs_averaged}
    return section


def _fleiss(data: LabelData) -> dict:
    """Fleiss' kappa with labels as nominal categories, on the units with the most common
    number of labels (classic Fleiss needs equal counts; the others are counted, not hidden)."""
    labels_per_unit = [data.labels(unit) for unit in data.units]
    categories = sorted(set(data.values).union(*map(set, labels_per_unit)))
    result = stats.fleiss_kappa_from_labels(labels_per_unit, categories)
    return {
        "value": finite_or_none(result.kappa),
        "units": result.items_used,
        "raters_per_unit": result.raters_per_item,
        "units_left_out": len(result.items_left_out),
    }


def _agreement(data: LabelData) -> dict:
    triples = data.triples()
    return {
        "krippendorff_alpha": krippendorff_alphas(triples, alpha_levels(data.values)),
        "fleiss_kappa": _fleiss(data),
        "cohen_kappa": pairwise_kappas(triples, data.values),
    }


def _span_agreement(data: LabelData) -> dict | None:
    """Mean pairwise token F1 and exact-match share of the spans marked on each item, averaged
    over items. Only annotators who marked at least one span are compared: whether a span was
    due at all is what the label agreement measures."""
    target = data.schema["spans"]
    if target is None:
        return None
    spans_by_item: dict[int, list[list[tuple[int, int]]]] = {}
    for answer in data.answers:
        spans = [(span["start"], span["end"]) for span in answer.spans if span.get("target", target) == target]
        if spans:
            spans_by_item.setdefault(answer.item_id, []).append(spans)
    compared = {item_id: spans for item_id, spans in spans_by_item.items() if len(spans) >= 2}
    texts = span_texts(data.study, compared.keys(), target)
    token_f1, exact, words_f1, words_exact = [], [], [], []
    for item_id, spans in compared.items():
        text = texts[item_id]
        token_f1.append(mean_pairwise_span_f1(text, spans))
        pairs = list(itertools.combinations(spans, 2))
        exact.append(sum(span_exact_match(text, first, second) for first, second in pairs) / len(pairs))
        excerpts = [" ".join(text[start:end] for start, end in sorted(marked)) for marked in spans]
        excerpt_pairs = list(itertools.combinations(excerpts, 2))
        words_f1.append(sum(bow_f1(first, second) for first, second in excerpt_pairs) / len(excerpt_pairs))
        words_exact.append(sum(text_exact_match(first, second) for first, second in excerpt_pairs) / len(excerpt_pairs))
    return {
        "target": target,
        "judgments_with_spans": sum(len(spans) for spans in spans_by_item.values()),
        "items": len(compared),
        "token_f1": _mean_or_none(token_f1),
        "exact_match": _mean_or_none(exact),
        # The quote-recommendation paper's measures, on the marked excerpts' words.
        "bow_f1": _mean_or_none(words_f1),
        "text_exact_match": _mean_or_none(words_exact),
    }


def _mean_or_none(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _rubric_agreement(data: LabelData) -> dict:
    """Krippendorff's alpha of every rubric field, each at the levels its own values allow."""
    section = {}
    for field in data.schema["rubric"]:
        name = field["name"]
        triples = [(a.annotator, a.item_id, a.rubric[name]) for a in data.answers if a.rubric.get(name) is not None]
        section[name] = {
            "values": field["values"],
            "judgments": len(triples),
            "krippendorff_alpha": krippendorff_alphas(triples, alpha_levels(field["values"])),
        }
    return section


def selection_overlap(first: frozenset[int], second: frozenset[int]) -> tuple[float, float]:
    """Jaccard |A & B| / |A | B| and F1 (Dice, = 2J / (1 + J)) of two annotators' selections;
    two empty selections agree fully."""
    union = first | second
    jaccard = len(first & second) / len(union) if union else 1.0
    return jaccard, 2.0 * jaccard / (1.0 + jaccard)


def _selection_agreement(data: LabelData) -> dict:
    """Multi-select pilot: pairwise Jaccard and F1 between annotators' selections per item,
    averaged over pairs and then over items with at least two annotators."""
    selections_by_item: dict[int, list[frozenset[int]]] = {}
    for answer in data.answers:
        selections_by_item.setdefault(answer.item_id, []).append(frozenset(answer.selections))
    jaccards, f1s = [], []
    for selections in selections_by_item.values():
        if len(selections) < 2:
            continue
        overlaps = [selection_overlap(first, second) for first, second in itertools.combinations(selections, 2)]
        jaccards.append(np.mean([jaccard for jaccard, _ in overlaps]))
        f1s.append(np.mean([f1 for _, f1 in overlaps]))
    return {
        "items": len(jaccards),
        "jaccard": float(np.mean(jaccards)) if jaccards else None,
        "f1": float(np.mean(f1s)) if f1s else None,
    }


# --- aggregated labels ------------------------------------------------------------------------------


def _aggregate_entry(data: LabelData, unit: Unit, reworked: Collection[int]) -> dict:
    """The unit's labels, their majority, mean and median, any adjudication, and where its final
    label (`_final_label`) comes from (annotation.provenance)."""
    labels = data.labels(unit)
    final, _ = _final_label(data, unit)
    origin = label_source(labels, final, adjudicated=unit.key in data.adjudicated, sent_back=unit.item.id in reworked)
    entry = {
        "item": unit.item.id,
        "position": unit.candidate.position,
        "query": unit.item.query,
        "passage": unit.candidate.passage,
        "labels": sorted(labels),
        "majority": None,
        "tied_labels": [],
        "mean": None,
        "median": None,
        "adjudicated": data.adjudicated.get(unit.key),
        "label_source": origin,
        "label_method": label_method(origin, DEFAULT_METHOD),
    }
    if labels:
        vote = majority_votes([labels])[0]
        entry.update(
            majority=vote.label,
            tied_labels=list(vote.tied_labels),
            mean=float(stats.mean_grades([labels])[0]),
            median=float(stats.median_grades([labels])[0]),
        )
    return entry


def _final_label(data: LabelData, unit: Unit) -> tuple[int | None, bool]:
    """The unit's label for shares and exports: staff's adjudication when there is one, else the
    majority vote with a tie going to the lower label; and whether a tie was resolved so."""
    if unit.key in data.adjudicated:
        return data.adjudicated[unit.key], False
    labels = data.labels(unit)
    if not labels:
        return None, False
    vote = majority_votes([labels], tie_rule="lowest")[0]
    return vote.label, vote.is_tie


def _quotable_share(data: LabelData) -> dict:
    """Share of items whose final label is the top of the scale ("quotable") with a Wilson 95 %
    interval: for items made of a model's top non-gold paragraphs, the quote-recommendation
    paper's "85 % judged quotable"."""
    positive = max(data.values)
    required = data.study.judgments_per_item
    flags, ties, adjudicated = [], 0, 0
    for unit in data.units:
        if len(data.labels(unit)) < required and unit.key not in data.adjudicated:
            continue
        label, tie = _final_label(data, unit)
        flags.append(label == positive)
        ties += tie
        adjudicated += unit.key in data.adjudicated
    estimate = stats.share_with_interval(flags, "wilson", CONFIDENCE_LEVEL)
    return {
        # How create_quotability_study drew the paragraphs: "top_non_gold" of a run is the paper's setting.
        "selection": data.study.parameters.get("selection"),
        "runs": data.study.parameters.get("runs", []),
        "share": finite_or_none(estimate.share),
        "positives": estimate.positives,
        "items": estimate.items,
        "ties_counted_not_quotable": ties,
        "adjudicated": adjudicated,
        "interval": None
        if estimate.interval is None
        else {"low": estimate.interval.low, "high": estimate.interval.high},
        "method": "wilson",
        "level": CONFIDENCE_LEVEL,
        "rule": QUOTABLE_RULE,
    }


# --- annotators -------------------------------------------------------------------------------------


def _annotators(data: LabelData, majorities: dict[tuple[int, int], int | None]) -> dict[str, dict]:
    """Per annotator: counted judgments, hidden-gold accuracy, agreement with the majority label
    of the units they rated (units with a unique majority of at least two labels, their own vote
    included), and the median seconds they reported."""
    judgments = Counter(answer.annotator for answer in data.answers)
    seconds: dict[str, list[float]] = {}
    for answer in data.answers:
        if answer.seconds is not None:
            seconds.setdefault(answer.annotator, []).append(answer.seconds)
    gold: dict[str, list[bool]] = {}
    for annotator, correct in gold_outcomes(data.study):
        gold.setdefault(annotator, []).append(correct)
    agreed: dict[str, list[bool]] = {}
    for unit in data.units:
        majority = majorities[unit.key]
        if majority is None or len(data.ratings[unit.key]) < 2:
            continue
        for annotator, label in data.ratings[unit.key].items():
            agreed.setdefault(annotator, []).append(label == majority)
    section = {}
    for annotator in sorted(set(judgments) | set(gold)):
        golds, agreements = gold.get(annotator, []), agreed.get(annotator, [])
        section[annotator] = {
            "judgments": judgments[annotator],
            "gold_judgments": len(golds),
            "gold_correct": sum(golds),
            "gold_accuracy": sum(golds) / len(golds) if golds else None,
            "majority_units": len(agreements),
            "agreement_with_majority": sum(agreements) / len(agreements) if agreements else None,
            "median_seconds": float(np.median(seconds[annotator])) if annotator in seconds else None,
        }
    return section


# --- models -----------------------------------------------------------------------------------------


def _correlation_entry(result: stats.RankCorrelation) -> dict:
    return {
        "statistic": finite_or_none(result.statistic),
        "p_value": finite_or_none(result.p_value),
        "items": result.items,
    }


def _model_section(data: LabelData, run: Run) -> dict:
    """Spearman's rho and Kendall's tau-b between the run's scores and the mean human grade, over
    the rated units whose (query, passage) the run stored a score for."""
    scores = run_scores(run, data.study)
    rated = [unit for unit in data.units if data.ratings[unit.key]]
    scored = [unit for unit in rated if (unit.item.query_id, unit.candidate.passage_id) in scores]
    section = {
        "run": run.pk,
        "name": str(run.retriever),
        "retriever": run.retriever.kind,
        "rated_units": len(rated),
        "covered_units": len(scored),
        # An imported run may not score every shown pair: the correlation covers these only.
        "coverage": len(scored) / len(rated) if rated else None,
        "spearman": None,
        "kendall_tau_b": None,
    }
    if len(scored) < MIN_CORRELATION_UNITS:
        return {**section, "reason": f"needs at least {MIN_CORRELATION_UNITS} rated units the run scored"}
    correlation = stats.correlate_with_mean_grades(
        [scores[(unit.item.query_id, unit.candidate.passage_id)][0] for unit in scored],
        [data.labels(unit) for unit in scored],
    )
    return {
        **section,
        "reason": None,
        "spearman": _correlation_entry(correlation.spearman),
        "kendall_tau_b": _correlation_entry(correlation.kendall_tau_b),
    }


# --- the report -------------------------------------------------------------------------------------


def label_study_report(study: Study, model_runs: Sequence[Run] = ()) -> dict:
    """Everything the report on a relevance or quotability study shows, as a JSON-ready dict."""
    data = label_data(study)
    reworked = rework_counts(study)
    aggregates = [_aggregate_entry(data, unit, reworked) for unit in data.units]
    majorities = {unit.key: entry["majority"] for unit, entry in zip(data.units, aggregates)}
    rated_items = {answer.item_id for answer in data.answers}
    judgments_per_item = Counter(answer.item_id for answer in data.answers)
    label_counts = Counter(label for _, _, label in data.triples())
    schema = data.schema
    return {
        "study": {
            "id": study.pk,
            "name": study.name,
            "kind": study.kind,
            "judgments_per_item": study.judgments_per_item,
            "scale": "selected-or-not" if data.multi_select else schema["scale"],
            "values": data.values,
            "value_labels": {"0": "Not selected", "1": "Selected"} if data.multi_select else schema["value_labels"],
            "multi_select": data.multi_select,
            "spans": schema["spans"],
            "rubric": [field["name"] for field in schema["rubric"]],
        },
        "computed_at": timezone.now().isoformat(),
        "items": len(data.items),
        "units": len(data.units),
        "judged_items": len(rated_items),
        "complete_items": sum(count >= study.judgments_per_item for count in judgments_per_item.values()),
        "judgments": len(data.answers),
        "label_counts": {
            str(value): label_counts.get(value, 0) for value in sorted(set(data.values) | set(label_counts))
        },
        "agreement": _agreement(data),
        "spans": _span_agreement(data),
        "rubric": _rubric_agreement(data),
        "selections": _selection_agreement(data) if data.multi_select else None,
        # Only a multi-select item shows several candidates to put in an order.
        "position_effect": selection_position_effect(study, shown_answers(study)) if data.multi_select else None,
        "quotable_share": (
            _quotable_share(data) if study.kind == Study.Kind.QUOTABILITY and not data.multi_select else None
        ),
        "ties": sum(bool(entry["tied_labels"]) for entry in aggregates),
        "adjudicated": len(data.adjudicated),
        "label_sources": label_sources_section(study),
        "aggregates": aggregates,
        "annotators": _annotators(data, majorities),
        "models": {str(run.pk): _model_section(data, run) for run in model_runs},
        "judges": {} if data.multi_select else label_judges(data, alpha_levels(data.values)),
        **crowd_sections(study),
    }
