"""Staff's bulk actions on a study's judgments, from the data manager: voiding many at once, and
sending items back to the queue.

Both keep every judgment (voided, with who, when and why) and free the slots the voided
judgments held, exactly as `queue.void_judgment` does one at a time: the judgment's assignment
turns "voided", so the item's live claims fall below `judgments_per_item` and the queue serves
it again, never to an annotator who judged it (one judgment per item and annotator, voided or
not). What differs is the provenance:

- `void_judgments` voids the live judgments of the chosen items (only one annotator's, when
  given) with staff's reason;
- `send_back` sends the chosen items back for a fresh round exactly as the adjudication
  workspace sends one back (`adjudication.send_items_back`, the one implementation of a
  send-back): each item gets its own `Rework` (the judgments it voided, the decision it
  withdrew), its decision and adjudication-queue entry are dropped, and its judgments are
  voided as "sent back for rework: <reason>", so label provenance, the adjudication queue and
  the item pages read a bulk send-back and a workspace one alike. Staff write the reason
  themselves here (the workspace's adjudicators choose from the study's list).

The items come as a queryset (a page's selection, or every row matching the data manager's
filter at any study size): the writes are a few statements over subqueries (UPDATEs, one DELETE
per table, Reworks by bulk_create), never a per-row save and never an IN list of every id
(SQLite refuses one beyond about a thousand). A voided judgment's pending peer review is no
longer offered (annotator pages ask for live judgments)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet

from retrieval.errors import InputError

from ..models import Item, Judgment, Rework, Study
from .adjudication import send_items_back
from .locks import lock_rows
from .queue import clean_void_reason, void_in_bulk

MAX_SEND_BACK_REASON = Rework._meta.get_field("reason").max_length


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did: the items it sent back (a send-back) or looked at (a void), the
    judgments it voided, and the decisions a send-back withdrew."""

    items: int
    voided: int
    withdrawn_decisions: int = 0

    def summary(self) -> dict:
        return {"items": self.items, "voided": self.voided, "withdrawn_decisions": self.withdrawn_decisions}


def void_judgments(study: Study, items: QuerySet[Item], *, by, reason, annotator=None) -> BulkResult:
    """Void the live judgments of `items` (the study's; only `annotator`'s when given) with
    `reason`. Judgments already voided keep their first reason. One transaction."""
    reason = clean_void_reason(reason)
    with transaction.atomic():
        lock_rows(Study.objects.filter(pk=study.pk))
        count = items.filter(study=study).count()
        judgments = Judgment.objects.filter(item__study=study, item__in=items.values("pk"))
        if annotator is not None:
            judgments = judgments.filter(annotator=annotator)
        holding = Item.objects.filter(study=study, pk__in=judgments.values("item_id"))
        voided = void_in_bulk(judgments, study=study, items=holding, by=by, reason=reason)
    return BulkResult(items=count, voided=voided)


def send_back(study: Study, items: QuerySet[Item], *, by, reason) -> BulkResult:
    """Send `items` (the study's) back for a fresh round: one Rework per item that has live
    judgments (see the module docstring). Items without live judgments are already in the
    queue and change nothing. The reason is at most as long as a Rework keeps. One transaction."""
    reason = clean_void_reason(reason)
    if len(reason) > MAX_SEND_BACK_REASON:
        raise InputError(f"a send-back's reason is at most {MAX_SEND_BACK_REASON} characters", field="reason")
    with transaction.atomic():
        lock_rows(Study.objects.filter(pk=study.pk))
        reworks = send_items_back(study, items, by=by, reason=reason)
    return BulkResult(
        items=len(reworks),
        voided=sum(len(rework.judgments) for rework in reworks),
        withdrawn_decisions=sum(rework.withdrawn_decision is not None for rework in reworks),
    )
