"""What every judgment write leaves behind besides the judgment: each item's stored live-judgment
figures, `Item.live_judgments` (its judgments not voided) and `Item.live_answers` (how many
different answers they give: the chosen candidate in a proxy study, the selected positions in a
multi-select label study, else the label; 0 in a preference study, whose answers are orders
compared in its own report), and a mark for the adjudication queue (AdjudicationChange) on each
of its work items. The data manager filters 100K items by status and agreement on these columns:
counting each item's judgments in a correlated subquery took 4-7 s per page there. The
adjudication queue follows the marked items alone instead of reading every judgment again.

Every service that adds, voids, deletes or rewrites a judgment calls `refresh_live_counts` in the
same transaction, after its write: submission (queue.submit), void_judgment and void_in_bulk
(the data manager's bulk void, send-back and rework, the adjudication workspace's send-back),
undo, revision and import. The figures are recounted from the judgments, never incremented, so a
refresh over more items than changed is harmless and a refresh always ends right. Under
concurrency, every one of those writers holds its items' row locks (SELECT ... FOR UPDATE; bulk
paths in id order) before it writes and until it commits, and recounts in a statement of its own:
on Postgres each statement reads what was committed when it began, so writers of one item follow
each other, each recounting what the ones before it committed plus its own write. SQLite's
IMMEDIATE transactions serialise every writer. A mark commits with the write it marks, so
whoever sees the mark sees the write; marks are only added, never updated, so no writer waits
for another's.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Count, F, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from ..models import AdjudicationChange, Item, Judgment, Study
from ..provenance import answer_column


def agreement_column(study: Study) -> str | None:
    """The judgment column two answers must share to agree (as annotation.services.quality
    compares them): the chosen candidate (proxy), the selected positions (multi-select) or the
    label; None for a preference study, whose answers are not compared item by item."""
    if study.kind == Study.Kind.PREFERENCE:
        return None
    if study.kind == Study.Kind.PROXY:
        return "choice_id"  # the candidate's row, one per position of an item: no join
    return answer_column(study)


def refresh_live_counts(study: Study, items: QuerySet[Item]) -> None:
    """Recount `items`' (the study's) live judgments and distinct live answers, in one UPDATE,
    and mark the work items among them for the adjudication queue. Inside the caller's
    transaction, after its judgment write, holding the items' row locks (see the module
    docstring)."""
    items.update(**live_count_expressions(study))
    mark_for_adjudication(study, items)


def mark_for_adjudication(study: Study, items: QuerySet[Item]) -> None:
    """One AdjudicationChange per work item of `items` (the study's), in one INSERT ... SELECT
    (a submission's one item or a bulk void's thousands alike); none in a preference study,
    which has no adjudication queue."""
    if study.kind == Study.Kind.PREFERENCE:
        return
    changed = items.filter(role=Item.Role.WORK).order_by().values(changed_item=F("pk"))
    select, params = changed.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {AdjudicationChange._meta.db_table} (study_id, item_id) "
            f"SELECT %s, changed.changed_item FROM ({select}) changed",
            [study.pk, *params],
        )


def live_count_expressions(study: Study) -> dict:
    """The UPDATE's values: each item's live judgments and distinct live answers, by subquery."""
    column = agreement_column(study)
    return {
        "live_judgments": _count_of(Count("pk")),
        "live_answers": _count_of(Count(column, distinct=True)) if column else Value(0),
    }


def _count_of(aggregate) -> Coalesce:
    live = Judgment.objects.filter(item=OuterRef("pk"), voided=False).order_by().values("item")
    return Coalesce(Subquery(live.annotate(n=aggregate).values("n")[:1]), Value(0), output_field=IntegerField())
