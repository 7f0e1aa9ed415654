"""What the annotation app reads back: annotator-facing payloads, staff exports, and the
judgments that statistics count.

Annotator-facing functions build their dictionaries from an explicit list of fields (candidate
id, position, text) and never touch `is_gold`, `source_run`, `source_rank`, passage or query
external ids (BIRCO's WhatsThatBook ids give the answer away), nor anyone else's answers.
"""
from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Q, QuerySet

from retrieval.models import Query

from .models import Assignment, Item, ItemCandidate, Judgment, Study


def context_sentences(query: Query, context_left: int, context_right: int) -> tuple[list[str], list[str]]:
    """The sentences shown around the masked quotation: the last L of the left context and the
    first R of the right one."""
    left = list(query.left_context)[-context_left:] if context_left else []
    return left, list(query.right_context)[:context_right]


def shown_context(query: Query, context_left: int, context_right: int) -> list[str]:
    """Everything the annotator reads besides the candidates; a query without context (BEIR,
    whose text already holds the "[masked sentence(s)]") shows its own text."""
    if not query.has_context:
        return [query.text]
    left, right = context_sentences(query, context_left, context_right)
    return [*left, *right]


def counted_judgments(study: Study) -> QuerySet[Judgment]:
    """The judgments statistics use: every judgment of the study that staff have not voided."""
    return (
        Judgment.objects.filter(item__study=study, voided=False)
        .select_related("item", "annotator", "choice")
        .order_by("item__position", "annotator__username")
    )


def studies_open_to(annotator) -> QuerySet[Study]:
    """Open studies that list this annotator, or list nobody (open to every annotator)."""
    return (
        Study.objects.filter(status=Study.Status.OPEN)
        .filter(Q(annotators=None) | Q(annotators=annotator))
        .distinct()
        .order_by("name")
    )


def annotator_progress(study: Study, annotator) -> dict:
    """How many of the study's items this annotator has judged, out of all its items."""
    return {
        "done": Judgment.objects.filter(item__study=study, annotator=annotator).count(),
        "total": study.items.count(),
    }


def annotator_item_payload(assignment: Assignment) -> dict:
    """What the annotator sees for a claimed item: candidates in display order with opaque ids,
    the context (or the query's own text), guidelines and their progress."""
    item, study = assignment.item, assignment.item.study
    query = item.query
    candidates = [
        {"id": pk, "position": position, "title": title, "text": text}
        for pk, position, title, text in ItemCandidate.objects.filter(item=item)
        .order_by("position")
        .values_list("pk", "position", "passage__title", "passage__text")
    ]
    left, right = context_sentences(query, study.context_left, study.context_right)
    return {
        "finished": False,
        "study": study.pk,
        "study_name": study.name,
        "kind": study.kind,
        "guidelines": study.guidelines,
        "item": item.pk,
        "candidates": candidates,
        "context_left": left,
        "context_right": right,
        "query_text": "" if query.has_context else query.text,
        "expires_at": assignment.expires_at.isoformat(),
        "progress": annotator_progress(study, assignment.annotator),
    }


def finished_payload(study: Study, annotator) -> dict:
    """Nothing (more) to do for this annotator in this study right now."""
    return {
        "finished": True,
        "study": study.pk,
        "study_name": study.name,
        "kind": study.kind,
        "guidelines": study.guidelines,
        "item": None,
        "progress": annotator_progress(study, annotator),
    }


def study_overview(study: Study) -> dict:
    """Staff-facing counts: items, judgments counted and voided, claims in progress."""
    judgments = Judgment.objects.filter(item__study=study)
    return {
        "items": study.items.count(),
        "judgments": judgments.filter(voided=False).count(),
        "voided": judgments.filter(voided=True).count(),
        "active_claims": Assignment.objects.filter(item__study=study, state=Assignment.State.ACTIVE).count(),
        "complete_items": study.items.annotate(
            live=Count("assignments", filter=Q(assignments__state=Assignment.State.SUBMITTED))
        ).filter(live__gte=study.judgments_per_item).count(),
    }


def study_export_rows(study: Study) -> Iterator[dict]:
    """Staff export, one row per item in study order: the query, candidates (passage external
    ids in display order), the gold, and where each candidate came from."""
    items = (
        Item.objects.filter(study=study)
        .select_related("query")
        .prefetch_related("candidates__passage")
        .order_by("position")
    )
    for item in items:
        candidates = sorted(item.candidates.all(), key=lambda c: c.position)
        yield {
            "item": item.pk,
            "query": item.query.external_id,
            "candidates": [c.passage.external_id for c in candidates],
            "gold": next((c.passage.external_id for c in candidates if c.is_gold), None),
            "sources": {
                c.passage.external_id: {"run": c.source_run_id, "rank": c.source_rank} for c in candidates
            },
        }


JUDGMENT_COLUMNS = (
    "judgment", "study", "item", "query", "annotator", "candidate", "choice", "position", "label", "correct",
    "seconds", "server_seconds", "submitted_at", "source", "voided", "void_reason",
)


def judgment_rows(study: Study) -> list[dict]:
    """Staff export, one flat row per judgment (voided ones included and flagged): `candidate`
    is the opaque candidate id, `choice` the chosen passage's external id (the same key
    import_judgments reads), `position` its 0-based display position, `correct` whether it was
    the gold (None for label judgments)."""
    judgments = (
        Judgment.objects.filter(item__study=study)
        .select_related("item__query", "annotator", "choice__passage")
        .order_by("item__position", "submitted_at", "pk")
    )
    return [
        {
            "judgment": j.pk,
            "study": study.pk,
            "item": j.item_id,
            "query": j.item.query.external_id,
            "annotator": j.annotator.username,
            "candidate": j.choice_id,
            "choice": j.choice.passage.external_id if j.choice else None,
            "position": j.choice.position if j.choice else None,
            "label": j.label,
            "correct": j.choice.is_gold if j.choice else None,
            "seconds": j.seconds,
            "server_seconds": j.server_seconds,
            "submitted_at": j.submitted_at.isoformat(),
            "source": j.source,
            "voided": j.voided,
            "void_reason": j.void_reason,
        }
        for j in judgments
    ]
