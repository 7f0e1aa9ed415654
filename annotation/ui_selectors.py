"""Read-side helpers for the web pages that `annotation.selectors` does not cover: the
annotator's list of studies, the staff study list and study detail, the keyboard scheme and
how a masked query text is split around its slot.

Annotator-facing functions here build on `annotation.selectors` and add nothing about gold,
provenance or external ids; the staff functions (`staff_*`) may show them.
"""
from __future__ import annotations

import re
from collections import defaultdict

from django.db.models import Count, Q

from .models import Assignment, Item, Judgment, Study
from .selectors import annotator_progress, studies_open_to, study_overview
from .services import annotator_refusal

# One key per option, so a single key press always picks exactly one candidate: 1-9, 0 for the
# tenth, then letters for options 11-20 (k is at most 20).
OPTION_KEYS = "1234567890abcdefghij"
# BEIR-style RELiC queries carry the mask inside their text.
MASK_MARKER = re.compile(r"\[masked sentences?(?:\(s\))?\]", re.IGNORECASE)


def option_key(position: int) -> str:
    """The key that picks the candidate shown at 0-based `position`."""
    return OPTION_KEYS[position]


def keyed_candidates(candidates: list[dict]) -> list[dict]:
    """The payload's candidates with their 1-based option number and their key."""
    return [{**candidate, "number": index + 1, "key": option_key(index)} for index, candidate in enumerate(candidates)]


def masked_text_segments(text: str) -> list[dict]:
    """A query's own text cut at each mask marker: [{"text": ..., "slot": False}, {"text":
    "[masked sentence(s)]", "slot": True}, ...], so the page can style the slot."""
    segments, cursor = [], 0
    for match in MASK_MARKER.finditer(text):
        segments.append({"text": text[cursor:match.start()], "slot": False})
        segments.append({"text": match.group(0), "slot": True})
        cursor = match.end()
    segments.append({"text": text[cursor:], "slot": False})
    return [segment for segment in segments if segment["text"]]


def annotation_page(work: dict) -> dict:
    """`next_work`'s payload made ready for the page: candidates with their numbers and keys,
    a plain-text query cut around its mask, and the key range the page explains."""
    if work["finished"]:
        return work
    candidates = keyed_candidates(work["candidates"])
    return {
        **work,
        "candidates": candidates,
        "query_segments": masked_text_segments(work["query_text"]) if work["query_text"] else [],
        "keys_hint": _keys_hint(len(candidates)),
    }


def _keys_hint(count: int) -> str:
    """How the keys map to options, e.g. "1-3", "1-9, 0 for 10", "1-9, 0 for 10, a-c for 11-13"."""
    if count <= 9:
        return f"1-{count}"
    hint = "1-9, 0 for 10"
    if count > 10:
        hint += f", a-{option_key(count - 1)} for 11-{count}" if count > 11 else ", a for 11"
    return hint


def annotator_studies(annotator) -> list[dict]:
    """The open studies this annotator may see, each with their progress, whether they have an
    item claimed (so the page says Continue rather than Start) and why they may not work on it."""
    studies = list(studies_open_to(annotator))
    claimed = set(
        Assignment.objects.filter(
            annotator=annotator, state=Assignment.State.ACTIVE, item__study__in=studies
        ).values_list("item__study", flat=True)
    )
    rows = []
    for study in studies:
        progress = annotator_progress(study, annotator)
        rows.append({
            "study": study,
            "progress": progress,
            "started": progress["done"] > 0 or study.pk in claimed,
            "finished": progress["total"] > 0 and progress["done"] >= progress["total"],
            "refusal": annotator_refusal(study, annotator),
        })
    return rows


def staff_studies() -> list[dict]:
    """Every study with its judgment progress: counted (not voided) judgments out of the number
    needed (items x judgments per item)."""
    studies = Study.objects.select_related("collection").annotate(
        item_count=Count("items", distinct=True),
        judgment_count=Count("items__judgments", filter=Q(items__judgments__voided=False), distinct=True),
    )
    return [
        {
            "study": study,
            "items": study.item_count,
            "done": study.judgment_count,
            "needed": study.item_count * study.judgments_per_item,
        }
        for study in studies
    ]


def staff_study_summary(study: Study) -> dict:
    """`study_overview` plus the number of judgments the study needs in all."""
    overview = study_overview(study)
    return {**overview, "needed": overview["items"] * study.judgments_per_item}


def staff_study_items(study: Study) -> list[dict]:
    """The study's items in order, for staff: query id, the gold's option number, candidate
    texts and every judgment (voided ones flagged) with the option chosen."""
    judgments_by_item = defaultdict(list)
    for judgment in (
        Judgment.objects.filter(item__study=study)
        .select_related("annotator", "choice", "voided_by")
        .order_by("submitted_at", "pk")
    ):
        judgments_by_item[judgment.item_id].append({
            "judgment": judgment,
            "option": judgment.choice.position + 1 if judgment.choice else None,
            "correct": judgment.choice.is_gold if judgment.choice else None,
        })
    items = (
        Item.objects.filter(study=study)
        .select_related("query")
        .prefetch_related("candidates__passage", "candidates__source_run")
        .order_by("position")
    )
    rows = []
    for item in items:
        candidates = sorted(item.candidates.all(), key=lambda candidate: candidate.position)
        rows.append({
            "item": item,
            "candidates": candidates,
            "gold_option": next((c.position + 1 for c in candidates if c.is_gold), None),
            "judgments": judgments_by_item[item.pk],
            "counted": sum(1 for row in judgments_by_item[item.pk] if not row["judgment"].voided),
        })
    return rows
