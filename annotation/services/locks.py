"""Row locks: the one way a service locks a set of rows for the rest of its transaction.

Its own module, below every service that writes (the queue, qualification, revisions, imports,
adjudication and the crowd links above them), so each can take its locks the same way.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import QuerySet


def lock_rows(queryset: QuerySet) -> None:
    """Lock every row of `queryset` (SELECT ... FOR UPDATE where the database has row locks:
    Postgres), in primary-key order, for the rest of the caller's transaction. Every lock taken
    on a set of rows goes through here, so two writers over overlapping rows take them in one
    order and cannot deadlock; only the queryset's own table is locked (`of=self`: not the rows of
    the tables its filters join), and the statement is read to the end, since Postgres locks only
    the rows a query returns (a LIMIT 1 would lock one). SQLite has no row locks: its IMMEDIATE
    transactions (settings) already serialise every writer, so the statement is skipped.

    The lock is FOR NO KEY UPDATE (`no_key`), the lock an UPDATE takes: it excludes every other
    locker and writer of the row but not the key-share lock a foreign key's check takes. Django's
    foreign keys are checked at COMMIT on Postgres (DEFERRABLE INITIALLY DEFERRED), so with FOR
    UPDATE an annotator who held their item and committed a judgment (which names its study)
    waited for a staffer holding the study, while the staffer waited for the item: a deadlock
    seen in the racing send-back test. No code changes a primary key, so nothing needs more."""
    if connection.features.has_select_for_update:
        list(queryset.select_for_update(of=("self",), no_key=True).order_by("pk").values_list("pk", flat=True))
