"""The annotator queue's hottest statements, written as SQL.

Every next-item request checks the annotator's standing, looks for the neediest item and counts
their progress. Built with the ORM, these three statements (subqueries, exclusions, a grouped
count) cost 2-5 ms of CPU each just to compile, on every request — more than everything the
database does for them (measured: the standing check 3.0 ms through the ORM, 0.03 ms as SQL).
They are the same rules as before, kept here in one place; tests/annotation/test_queue.py and
test_query_counts.py hold them to the queue's behaviour.
"""

from __future__ import annotations

from enum import Enum

from django.db import connection

from .models import (
    LIVE_ASSIGNMENT_STATES,
    AnnotatorProfile,
    Assignment,
    Item,
    Judgment,
    PeerReview,
    Study,
    StudyBlock,
    StudyGrant,
)

# Claims that keep an item from being served to the same annotator again.
NOT_AGAIN_STATES = (*LIVE_ASSIGNMENT_STATES, Assignment.State.SKIPPED)
FORMAL_ROLES = (Item.Role.WORK, Item.Role.GOLD)

_ITEM = Item._meta.db_table
_ASSIGNMENT = Assignment._meta.db_table
_JUDGMENT = Judgment._meta.db_table
_PEER_REVIEW = PeerReview._meta.db_table
_STUDY_ANNOTATORS = Study.annotators.through._meta.db_table
_STUDY_BLOCK = StudyBlock._meta.db_table
_PROFILE = AnnotatorProfile._meta.db_table
_GRANT = StudyGrant._meta.db_table
# The account's own quota in the study (a crowd participant's), NULL without one.
_GRANT_QUOTA = f"(SELECT item_quota FROM {_GRANT} WHERE study_id = %s AND annotator_id = %s)"


def _placeholders(values) -> str:
    return ", ".join(["%s"] * len(values))


def _plain(params: list) -> list:
    """Choice members as their plain string values (what every database driver adapts)."""
    return [str(value) if isinstance(value, Enum) else value for value in params]


def _row(sql: str, params: list) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql, _plain(params))
        return cursor.fetchone()


def standing(study_id: int, annotator_id: int) -> dict:
    """Whether the study lists annotators, lists this one, blocks this one, and whether this one
    is blocked everywhere, works only on the studies granted to it, has this study granted, and
    the quota its grant carries here (a crowd participant's), if any."""
    row = _row(
        f"SELECT EXISTS(SELECT 1 FROM {_STUDY_ANNOTATORS} WHERE study_id = %s),"
        f" EXISTS(SELECT 1 FROM {_STUDY_ANNOTATORS} WHERE study_id = %s AND user_id = %s),"
        f" EXISTS(SELECT 1 FROM {_STUDY_BLOCK} WHERE study_id = %s AND annotator_id = %s),"
        f" EXISTS(SELECT 1 FROM {_PROFILE} WHERE user_id = %s AND blocked = %s),"
        f" EXISTS(SELECT 1 FROM {_PROFILE} WHERE user_id = %s AND only_granted = %s),"
        f" EXISTS(SELECT 1 FROM {_GRANT} WHERE study_id = %s AND annotator_id = %s),"
        f" {_GRANT_QUOTA}",
        [study_id, study_id, annotator_id, study_id, annotator_id, annotator_id, True, annotator_id, True]
        + [study_id, annotator_id] * 2,
    )
    *flags, item_quota = row
    names = ("has_list", "listed", "blocked_here", "blocked_everywhere", "only_granted", "granted")
    return {**{name: bool(value) for name, value in zip(names, flags)}, "item_quota": item_quota}


def progress_counts(study_id: int, annotator_id: int) -> tuple[int, int, int | None]:
    """(judged by the annotator, formal items of the study, the quota of their grant there or None)."""
    return _row(
        f"SELECT (SELECT COUNT(*) FROM {_JUDGMENT} j JOIN {_ITEM} i ON i.id = j.item_id"
        f"         WHERE i.study_id = %s AND j.annotator_id = %s),"
        f" (SELECT COUNT(*) FROM {_ITEM} WHERE study_id = %s AND role <> %s),"
        f" {_GRANT_QUOTA}",
        [study_id, annotator_id, study_id, Item.Role.QUALIFICATION, study_id, annotator_id],
    )


def claimable_item_ids(study: Study, annotator_id: int, limit: int | None = None) -> list[int]:
    """The formal items (work and hidden gold) the queue may give the annotator, neediest first
    (fewest live claims, then study order): a slot free, not judged, held or skipped by them,
    and none whose answer they were shown in a peer review (their own judgment would no longer
    be independent)."""
    sql = (
        f"SELECT i.id FROM {_ITEM} i"
        f" LEFT JOIN {_ASSIGNMENT} a ON a.item_id = i.id AND a.state IN ({_placeholders(LIVE_ASSIGNMENT_STATES)})"
        f" WHERE i.study_id = %s AND i.role IN ({_placeholders(FORMAL_ROLES)})"
        f" AND NOT EXISTS (SELECT 1 FROM {_JUDGMENT} j WHERE j.item_id = i.id AND j.annotator_id = %s)"
        f" AND NOT EXISTS (SELECT 1 FROM {_ASSIGNMENT} m WHERE m.item_id = i.id AND m.annotator_id = %s"
        f"                 AND m.state IN ({_placeholders(NOT_AGAIN_STATES)}))"
        f" AND NOT EXISTS (SELECT 1 FROM {_PEER_REVIEW} r JOIN {_JUDGMENT} rj ON rj.id = r.judgment_id"
        f"                 WHERE r.reviewer_id = %s AND rj.item_id = i.id)"
        f" GROUP BY i.id, i.position HAVING COUNT(a.id) < %s ORDER BY COUNT(a.id), i.position"
    )
    params = [
        *LIVE_ASSIGNMENT_STATES,
        study.pk,
        *FORMAL_ROLES,
        annotator_id,
        annotator_id,
        *NOT_AGAIN_STATES,
        annotator_id,
        study.judgments_per_item,
    ]
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, _plain(params))
        return [row[0] for row in cursor.fetchall()]
