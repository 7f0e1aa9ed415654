"""Staff's bulk actions on a study's judgments: voiding many at once, and sending items back to
the queue.

Both keep every judgment (voided, with who, when and why) and free the slots the voided
judgments held, exactly as `queue.void_judgment` does one at a time: the judgment's assignment
turns "voided", so the item's live claims fall below `judgments_per_item` and the queue serves
it again, never to an annotator who judged it (one judgment per item and annotator, voided or
not). What differs is the provenance:

- `void_judgments` voids the live judgments of the chosen items (only one annotator's, when
  given) with staff's reason;
- `send_back` voids every live judgment of the chosen items under one `Rework` record (the
  judgments point to it; their reason says "sent back for rework: ..."), so the items are judged
  again from scratch.

The items come as a queryset (a page's selection, or every row matching the data manager's
filter at any study size): the writes are a few UPDATE statements over subqueries, never a
per-row save and never an IN list of every id (SQLite refuses one beyond about a thousand).
Adjudications and peer reviews are left as they are; a voided judgment's pending review is no
longer offered (annotator pages ask for live judgments)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from ..models import Assignment, Item, Judgment, Rework, Study
from .queue import clean_void_reason, lock_rows

REWORK_PREFIX = "sent back for rework: "


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did: the items it looked at, the judgments it voided, and the Rework
    record of a send-back (None for a plain void)."""

    items: int
    voided: int
    rework: Rework | None = None

    def summary(self) -> dict:
        return {"items": self.items, "voided": self.voided, "rework": self.rework.pk if self.rework else None}


def _live_judgments(study: Study, items: QuerySet[Item], annotator=None) -> QuerySet[Judgment]:
    judgments = Judgment.objects.filter(item__study=study, item__in=items.values("pk"), voided=False)
    return judgments if annotator is None else judgments.filter(annotator=annotator)


def _void(judgments: QuerySet[Judgment], *, by, reason: str, rework: Rework | None = None) -> int:
    """Void `judgments` and free their slots, inside the caller's transaction. On Postgres the
    judgments are locked first, then their assignments are written: the order void_judgment and
    undo follow, so a racing undo either finds its judgment voided or has deleted it already.
    (SQLite's IMMEDIATE transactions serialise every writer.)"""
    if connection.features.has_select_for_update:
        list(judgments.select_for_update().values_list("pk", flat=True))
    Assignment.objects.filter(pk__in=judgments.filter(assignment__isnull=False).values("assignment_id")).update(
        state=Assignment.State.VOIDED
    )
    return judgments.update(voided=True, void_reason=reason, voided_by=by, voided_at=timezone.now(), rework=rework)


def void_judgments(study: Study, items: QuerySet[Item], *, by, reason, annotator=None) -> BulkResult:
    """Void the live judgments of `items` (the study's; only `annotator`'s when given) with
    `reason`. Judgments already voided keep their first reason. One transaction."""
    reason = clean_void_reason(reason)
    with transaction.atomic():
        lock_rows(Study.objects.filter(pk=study.pk))
        count = items.filter(study=study).count()
        voided = _void(_live_judgments(study, items, annotator), by=by, reason=reason)
    return BulkResult(items=count, voided=voided)


def send_back(study: Study, items: QuerySet[Item], *, by, reason) -> BulkResult:
    """Send `items` back to the queue: every live judgment of theirs is voided under one Rework
    record, so all their slots reopen. Items without live judgments are already in the queue
    and change nothing. One transaction."""
    reason = clean_void_reason(reason)
    with transaction.atomic():
        lock_rows(Study.objects.filter(pk=study.pk))
        chosen = items.filter(study=study)
        judgments = _live_judgments(study, chosen)
        sent = chosen.filter(pk__in=judgments.values("item_id")).count()
        if not sent:
            return BulkResult(items=0, voided=0)
        rework = Rework.objects.create(study=study, reason=reason, requested_by=by, items=sent)
        voided = _void(judgments, by=by, reason=REWORK_PREFIX + reason, rework=rework)
        Rework.objects.filter(pk=rework.pk).update(judgments=voided)
        rework.judgments = voided
    return BulkResult(items=sent, voided=voided, rework=rework)
