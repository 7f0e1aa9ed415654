"""Read-only queries behind the reports: what was shown, what annotators chose, what runs scored.

Staff-only: these read gold flags and candidate provenance.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db.models import Count, Max, Q, Sum

from annotation.models import Item, ItemCandidate, Judgment, Study
from annotation.selectors import counted_judgments
from retrieval.models import Hit, Run

# Bump when the report's computation or layout changes, so cached payloads are recomputed.
REPORT_FORMAT = 1


@dataclass(frozen=True)
class ShownCandidate:
    candidate_id: int
    position: int
    passage_id: int
    passage: str
    is_gold: bool


@dataclass(frozen=True)
class ShownItem:
    id: int
    position: int
    query_id: int
    query: str
    candidates: tuple[ShownCandidate, ...]

    @property
    def gold(self) -> ShownCandidate | None:
        return next((candidate for candidate in self.candidates if candidate.is_gold), None)


@dataclass(frozen=True)
class Choice:
    item_id: int
    annotator: str
    position: int
    chose_gold: bool


def shown_items(study: Study) -> list[ShownItem]:
    """Every item of the study with its candidates in display order."""
    candidates: dict[int, list[ShownCandidate]] = {}
    rows = (
        ItemCandidate.objects.filter(item__study=study)
        .order_by("item_id", "position")
        .values_list("item_id", "id", "position", "passage_id", "passage__external_id", "is_gold")
    )
    for item_id, candidate_id, position, passage_id, passage, is_gold in rows:
        candidates.setdefault(item_id, []).append(ShownCandidate(candidate_id, position, passage_id, passage, is_gold))
    items = Item.objects.filter(study=study).order_by("position").values_list("id", "position", "query_id", "query__external_id")
    return [
        ShownItem(item_id, position, query_id, query, tuple(candidates.get(item_id, ())))
        for item_id, position, query_id, query in items
    ]


def counted_choices(study: Study) -> list[Choice]:
    """What each counted judgment chose, as the position shown; judgments without a choice
    (labels, ratings) are not proxy answers and are left out."""
    rows = (
        counted_judgments(study)
        .filter(choice__isnull=False)
        .order_by("item_id", "id")
        .values_list("item_id", "annotator__username", "choice__position", "choice__is_gold")
    )
    return [Choice(item_id, annotator, position, is_gold) for item_id, annotator, position, is_gold in rows]


def negatives_run_ids(study: Study) -> set[int]:
    """Runs that supplied candidates shown in the study: the study's negatives run and every
    candidate's source run."""
    sources = set(
        ItemCandidate.objects.filter(item__study=study, source_run__isnull=False)
        .values_list("source_run_id", flat=True)
        .distinct()
    )
    if study.negatives_run_id is not None:
        sources.add(study.negatives_run_id)
    return sources


def run_scores(run: Run, items: Sequence[ShownItem]) -> dict[tuple[int, int], tuple[float, int]]:
    """(query id, passage id) -> (score, rank) for the run's stored hits on the shown candidates."""
    query_ids = {item.query_id for item in items}
    passage_ids = {candidate.passage_id for item in items for candidate in item.candidates}
    rows = Hit.objects.filter(run=run, query_id__in=query_ids, passage_id__in=passage_ids).values_list(
        "query_id", "passage_id", "score", "rank"
    )
    return {(query_id, passage_id): (score, rank) for query_id, passage_id, score, rank in rows}


def report_fingerprint(study: Study, runs: Iterable[Run]) -> str:
    """A digest of everything a study report depends on. Any new, voided or excluded judgment,
    any change to items, candidates, the study's settings or the runs' hits changes it."""
    counted = counted_judgments(study).order_by().aggregate(count=Count("id"), last=Max("id"), id_sum=Sum("id"))
    voided = Judgment.objects.filter(item__study=study).aggregate(
        voided=Count("id", filter=Q(voided=True)), last_voided=Max("voided_at")
    )
    items = Item.objects.filter(study=study).aggregate(count=Count("id"), last=Max("id"))
    candidates = ItemCandidate.objects.filter(item__study=study).aggregate(
        count=Count("id"), last=Max("id"), golds=Count("id", filter=Q(is_gold=True))
    )
    run_states = [
        {"id": run.pk, "status": run.status, **Hit.objects.filter(run=run).aggregate(hits=Count("id"), last=Max("id"))}
        for run in sorted(runs, key=lambda run: run.pk)
    ]
    inputs = {
        "format": REPORT_FORMAT,
        "study": [study.kind, study.candidates_per_item, study.judgments_per_item, study.negatives_run_id],
        "counted": counted,
        "voided": voided,
        "items": items,
        "candidates": candidates,
        "runs": run_states,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
