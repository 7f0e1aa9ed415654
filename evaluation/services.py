"""Study reports. `study_report` picks the report of the study's kind: proxy studies get
agreement, human and model accuracy with confidence intervals, paired tests and the item lists
used for error analysis (RELiC Tables 5 and A4), written here; relevance and quotability
studies get `evaluation.label_report`, preference studies `evaluation.preference_report`.
`evaluation.reports.cached_study_report` serves any of them from the cache.

Proxy positions are the 0-based item positions of the candidates (`ItemCandidate.position`); the
Fleiss category is the item position, because every item has its own candidates: it names the
candidate, so annotators who chose the same passage agree even where a study shuffles the order
per annotator and each saw it elsewhere. Where each saw it is the position effect's business
(evaluation.positions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from django.utils import timezone

from annotation.models import Study
from annotation.services.revisions import revision_summary
from evaluation import agreement
from evaluation.chance import chance_section
from evaluation.crowd_report import crowd_sections
from evaluation.judge_report import proxy_judges
from evaluation.label_aggregation import label_sources_section
from evaluation.label_report import label_study_report
from evaluation.positions import proxy_position_effect
from evaluation.post_editing import post_editing_report
from evaluation.preference_report import preference_study_report
from evaluation.reports import cached_study_report
from evaluation.selectors import (
    ItemLabel,
    ProxyChoices,
    ProxyItems,
    ShownCandidate,
    ShownItem,
    gold_outcomes,
    item_labels,
    negatives_run_ids,
    proxy_choices,
    proxy_items,
    run_scores,
    shown_answers,
    shown_items,
)
from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.models import Run

NOT_COMPARABLE_REASON = "supplied the negatives shown to annotators"


def _require_proxy(study: Study) -> None:
    if study.kind != Study.Kind.PROXY:
        raise InputError(f"study {study.pk} is a {study.kind} study; this report covers proxy studies", field="study")


def _interval(interval: agreement.Interval | None) -> dict | None:
    return None if interval is None else {"low": interval.low, "high": interval.high}


@dataclass(frozen=True)
class HumanVotes:
    """The complete items (exactly the study's judgments per item) as a counts table: `item_ids`
    in display order, their votes per position and their gold position."""

    item_ids: np.ndarray
    counts: np.ndarray
    gold: np.ndarray

    # Computed once per report: each is read by several sections.
    @cached_property
    def majority_correct(self) -> np.ndarray:
        return agreement.majority_correct_flags(self.counts, self.gold)

    @cached_property
    def gold_votes(self) -> np.ndarray:
        return self.counts[np.arange(len(self.counts)), self.gold]

    @cached_property
    def unanimous_gold(self) -> np.ndarray:
        return self.gold_votes == self.counts.sum(axis=1)

    @cached_property
    def unanimous_non_gold(self) -> np.ndarray:
        return agreement.all_agree_flags(self.counts) & (self.gold_votes == 0)


def _human_votes(items: ProxyItems, complete: np.ndarray, choices: ProxyChoices, categories: int) -> HumanVotes:
    """The votes of the `complete` rows of `items`, from every counted choice."""
    row_of_item = np.full(len(items.ids), -1, dtype=np.int64)
    row_of_item[complete] = np.arange(len(complete))
    choice_items = np.isin(choices.item_ids, items.ids)
    rows = np.full(len(choices.item_ids), -1, dtype=np.int64)
    rows[choice_items] = row_of_item[items.rows(choices.item_ids[choice_items])]
    counted = rows >= 0
    counts = agreement.counts_from_pairs(rows[counted], choices.positions[counted], len(complete), categories)
    return HumanVotes(items.ids[complete], counts, items.gold[complete])


def _agreement_section(votes: HumanVotes) -> dict:
    """Point estimates and bootstrap intervals of the agreement and majority statistics."""
    counts = votes.counts
    per_item = {
        "all_agree": agreement.all_agree_flags(counts),
        "none_agree": agreement.none_agree_flags(counts),
        "majority_accuracy": votes.majority_correct,
    }
    section = {name: agreement.finite_or_none(agreement.share(flags)) for name, flags in per_item.items()}
    section["fleiss_kappa"] = agreement.finite_or_none(agreement.fleiss_kappa(counts))
    section["randolph_kappa"] = agreement.finite_or_none(agreement.randolph_kappa(counts))
    types = agreement.item_types(counts, votes.majority_correct)
    shown = counts[types.representatives]
    statistics = {
        name: (lambda weights, flags=flags[types.representatives]: agreement.weighted_mean(flags, weights))
        for name, flags in per_item.items()
    }
    for chance in ("fleiss", "randolph"):
        statistics[f"{chance}_kappa"] = lambda weights, chance=chance: agreement.weighted_kappa(shown, weights, chance)
    intervals = agreement.bootstrap_intervals(statistics, types.multiplicities)
    section["confidence_intervals"] = {name: _interval(interval) for name, interval in intervals.items()}
    return section


def model_answers(run: Run, study: Study, items: Sequence[ShownItem]) -> dict[int, ShownCandidate | None]:
    """item id -> the run's answer: its highest-scoring shown candidate, ties going to the one
    the run ranked higher. Shown candidates the run did not store rank below all stored ones,
    so an item none of whose candidates were stored has no answer (None: not covered)."""
    scores = run_scores(run, study)
    answers = {}
    for item in items:
        scored = [
            (scores[(item.query_id, c.passage_id)], c)
            for c in item.candidates
            if (item.query_id, c.passage_id) in scores
        ]
        answers[item.id] = max(scored, key=lambda pair: (pair[0][0], -pair[0][1]))[1] if scored else None
    return answers


def candidate_coverage(run: Run, study: Study, items: Sequence[ShownItem]) -> dict:
    """How many of the shown candidates the run scored (an imported run may not have ranked them
    all): `shown_candidates`, `scored_candidates`, `candidate_coverage` (their share) and
    `fully_scored_items`. An unscored candidate ranks below every scored one in the model's
    answer, so a coverage below 1 is reported, never silent."""
    scores = run_scores(run, study)
    scored = [sum((item.query_id, candidate.passage_id) in scores for candidate in item.candidates) for item in items]
    shown = sum(len(item.candidates) for item in items)
    return {
        "shown_candidates": shown,
        "scored_candidates": sum(scored),
        "candidate_coverage": sum(scored) / shown if shown else None,
        "fully_scored_items": sum(count == len(item.candidates) for count, item in zip(scored, items, strict=True)),
    }


def _item_entry(item: ItemLabel, votes: np.ndarray, **extra) -> dict:
    """An item for error analysis: its gold and the human votes per display position."""
    return {
        "item": item.id,
        "position": item.position,
        "query": item.query,
        "gold": item.gold,
        "gold_passage": item.gold_passage,
        "votes": [int(count) for count in votes],
        **extra,
    }


def _model_section(
    run: Run, study: Study, items: Sequence[ShownItem], votes: HumanVotes, head: dict
) -> tuple[dict, list[dict]]:
    """Accuracy of one comparable run on the study's items (`head` names it) and its paired
    test against the human majority on the complete items; plus the items where unanimous
    humans chose the gold and the run did not (RELiC Table 5)."""
    answers = model_answers(run, study, items)
    covered = [item for item in items if answers[item.id] is not None]
    correct = np.array([answers[item.id].is_gold for item in covered], dtype=bool)
    paired = [(row, answers[item_id]) for row, item_id in enumerate(votes.item_ids.tolist()) if answers[item_id]]
    model_correct = np.array([answer.is_gold for _, answer in paired], dtype=bool)
    humans_correct = votes.majority_correct[[row for row, _ in paired]]
    test = agreement.mcnemar_exact(model_correct, humans_correct)
    failures = [(row, answer) for row, answer in paired if votes.unanimous_gold[row] and not answer.is_gold]
    labels = item_labels(int(votes.item_ids[row]) for row, _ in failures)
    humans_right_model_wrong = [
        _item_entry(
            labels[int(votes.item_ids[row])],
            votes.counts[row],
            model_answer=answer.position,
            model_answer_passage=answer.passage,
        )
        for row, answer in failures
    ]
    section = {
        **head,
        "comparable": True,
        "reason": None,
        "accuracy": agreement.finite_or_none(agreement.share(correct)),
        "confidence_interval": _interval(agreement.bootstrap_share_interval(correct)),
        "covered_items": len(covered),
        "correct_items": int(correct.sum()),
        "coverage": agreement.finite_or_none(len(covered) / len(items)) if items else None,
        **candidate_coverage(run, study, items),
        "mcnemar": {
            "paired_items": len(paired),
            "model_only_correct": test.first_only,
            "humans_only_correct": test.second_only,
            "p_value": test.p_value,
        },
    }
    return section, humans_right_model_wrong


def _random_section(study: Study, complete_items: int) -> dict:
    baseline = agreement.random_baseline(study.candidates_per_item, study.judgments_per_item)
    return {
        "options": baseline.options,
        "raters": baseline.raters,
        "fleiss_kappa": baseline.fleiss_kappa,
        "randolph_kappa": baseline.randolph_kappa,
        "all_agree": baseline.all_agree,
        "none_agree": baseline.none_agree,
        "majority_accuracy": baseline.majority_accuracy,
        "accuracy": baseline.accuracy,
        "accuracy_range": _interval(agreement.random_accuracy_range(baseline.options, complete_items)),
    }


def study_report(study: Study, model_runs: Sequence[Run] = ()) -> dict:
    """The report of the study's kind, as a JSON-ready dict; a post-editing study's has its
    conditions compared (`post_editing`); every report says how many of its judgments were
    revised by their annotators (`revisions`: every figure reads the latest revision)."""
    if study.kind == Study.Kind.PROXY:
        report = proxy_study_report(study, model_runs)
    elif study.kind == Study.Kind.PREFERENCE:
        report = preference_study_report(study, model_runs)
    else:
        report = label_study_report(study, model_runs)
    return {**report, **post_editing_report(study), "revisions": revision_summary(study)}


def proxy_study_report(study: Study, model_runs: Sequence[Run] = ()) -> dict:
    """Everything the proxy study report shows, as a JSON-ready dict (see DESIGN.md's contract).
    Items and judgments are read as columns and counted with numpy; per-item objects are built
    only for model runs (whose answers compare candidates) and for the items the error-analysis
    lists name."""
    _require_proxy(study)
    shown = proxy_items(study)
    items = shown.take(shown.gold >= 0)
    choices = proxy_choices(study)
    judged = np.bincount(shown.rows(choices.item_ids), minlength=len(shown.ids))[shown.gold >= 0]
    required = study.judgments_per_item
    complete = np.flatnonzero(judged == required)
    categories = max([study.candidates_per_item, *items.candidates.tolist()])
    votes = _human_votes(items, complete, choices, categories)
    annotators = agreement.annotator_accuracy_columns(choices.names, choices.annotators, choices.chose_gold)
    supplied_negatives = negatives_run_ids(study) if model_runs else set()
    models, model_failures = {}, {}
    compared_items = None  # per-item candidates, read only when a run is compared
    for run in model_runs:
        head = {"run": run.pk, "name": str(run.retriever), "retriever": run.retriever.kind, "items": len(items.ids)}
        if run.pk in supplied_negatives:
            models[str(run.pk)] = {**head, "comparable": False, "reason": NOT_COMPARABLE_REASON, "accuracy": None}
            continue
        if compared_items is None:
            compared_items = [item for item in shown_items(study) if item.gold is not None]
        models[str(run.pk)], model_failures[str(run.pk)] = _model_section(run, study, compared_items, votes, head)
    non_gold_rows = np.flatnonzero(votes.unanimous_non_gold)
    labels = item_labels(votes.item_ids[non_gold_rows].tolist())
    unanimous_non_gold = [
        _item_entry(labels[int(votes.item_ids[row])], votes.counts[row], chosen=int(votes.counts[row].argmax()))
        for row in non_gold_rows
    ]
    human = _agreement_section(votes)
    judges = proxy_judges(study, items, votes.item_ids, votes.counts, votes.majority_correct)
    return {
        "study": {
            "id": study.pk,
            "name": study.name,
            "kind": study.kind,
            "candidates_per_item": study.candidates_per_item,
            "judgments_per_item": required,
        },
        "computed_at": timezone.now().isoformat(),
        "items": len(items.ids),
        "complete_items": len(complete),
        "excluded_items": {
            "incomplete": items.ids[judged < required].tolist(),
            "over_judged": items.ids[judged > required].tolist(),
            "without_gold": shown.ids[shown.gold < 0].tolist(),
        },
        "judgments": len(choices.item_ids),
        **{
            key: human[key]
            for key in ("fleiss_kappa", "randolph_kappa", "all_agree", "none_agree", "majority_accuracy")
        },
        "confidence_intervals": human["confidence_intervals"],
        "confidence": {
            "level": agreement.CONFIDENCE_LEVEL,
            "method": "percentile bootstrap over items",
            "resamples": agreement.BOOTSTRAP_RESAMPLES,
            "seed": agreement.BOOTSTRAP_SEED,
        },
        "annotator_accuracy": {name: tally["accuracy"] for name, tally in annotators.items()},
        "annotators": annotators,
        # Accuracy on the hidden gold items mixed into the work (not counted above).
        "gold_accuracy": agreement.annotator_accuracy(gold_outcomes(study)),
        "model_accuracy": {run_id: section["accuracy"] for run_id, section in models.items()},
        "models": models,
        "random_baseline": _random_section(study, len(complete)),
        "label_sources": label_sources_section(study),
        "position_effect": proxy_position_effect(study, shown_answers(study)),
        "judges": judges,
        "chance": chance_section(models, judges, study.candidates_per_item),
        "error_analysis": {
            "unanimous_non_gold": unanimous_non_gold,
            "humans_agree_model_fails": model_failures,
        },
        **crowd_sections(study),
    }


def refresh_study_report(study_id: int, run_ids: Sequence[int], progress: Progress = no_progress) -> dict:
    """A report job's work: compute and store the report (see study_report_or_job)."""
    study = Study.objects.get(pk=study_id)
    progress(0.0, f"computing the report of study {study_id}")
    cached_study_report(study, list(Run.objects.filter(pk__in=run_ids).order_by("pk")))
    return {"study": study_id, "model_runs": sorted(run_ids)}
