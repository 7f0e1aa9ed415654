"""Fresh planner statistics after a bulk write. Postgres plans each query on its tables'
statistics, which autovacuum refreshes only about a minute after a large write commits; until
then a study imported a moment ago looks empty to the planner, and exporting or reporting it can
pick a nested loop over every item for every candidate (minutes instead of seconds, seen at 10K
items). So whatever writes in bulk (imports, a finished run, a new study, imported judgments)
analyzes the tables it filled. ANALYZE samples a bounded number of rows (30,000 by default),
so it costs well under a second at any size, and it counts the writing transaction's own rows.
SQLite's planner needs no statistics for these queries: nothing is done there."""

from __future__ import annotations

from django.db import connection, models


def refresh_statistics(*written: type[models.Model]) -> None:
    """ANALYZE the tables of `written` on Postgres; nothing on other databases."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for model in written:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
