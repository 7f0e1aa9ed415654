"""Read-only queries behind the reports: what was shown, what annotators chose or labelled,
what runs scored.

Staff-only: these read gold flags, known answers and candidate provenance. Statistics read
judgments only through `annotation.selectors.counted_judgments` (the one definition of what
counts), gold accuracy only through `gold_judgments`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from annotation.models import (
    Adjudication,
    AnnotatorProfile,
    Item,
    ItemCandidate,
    Judgment,
    JudgmentRevision,
    Rework,
    Study,
    StudyBlock,
)
from annotation.post_editing import CONDITION_KEY
from annotation.selectors import counted_judgments, gold_judgments, span_target_text
from annotation.services.labels import is_correct
from evaluation.models import AgreementWatch
from judges.selectors import judge_answers_fingerprint
from retrieval.chunks import chunks
from retrieval.models import Hit, Run

# Bump when the report's computation or layout changes, so cached payloads are recomputed.
REPORT_FORMAT = 5


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


def shown_items(study: Study) -> list[ShownItem]:
    """Every formal work item of the study with its candidates in display order. Hidden gold
    and qualification items are checks on the annotators, not data: they never enter a report's
    items (their judgments are not counted either)."""
    candidates: dict[int, list[ShownCandidate]] = {}
    rows = (
        ItemCandidate.objects.filter(item__study=study)
        .order_by("item_id", "position")
        .values_list("item_id", "id", "position", "passage_id", "passage__external_id", "is_gold")
    )
    for item_id, candidate_id, position, passage_id, passage, is_gold in rows:
        candidates.setdefault(item_id, []).append(ShownCandidate(candidate_id, position, passage_id, passage, is_gold))
    items = (
        Item.objects.filter(study=study, role=Item.Role.WORK)
        .order_by("position")
        .values_list("id", "position", "query_id", "query__external_id")
    )
    return [
        ShownItem(item_id, position, query_id, query, tuple(candidates.get(item_id, ())))
        for item_id, position, query_id, query in items
    ]


def item_texts(study: Study) -> dict[int, tuple[int, str, list[str]]]:
    """item id -> (position in the study, query external id, passage external ids of its
    candidates in display order), for every item: what an export names an item by (read as the
    driver returns the rows: Django's row iterator took twice as long as the database)."""
    passages: dict[int, list[str]] = {}
    rows, _ = driver_rows(
        ItemCandidate.objects.filter(item__study=study)
        .order_by("item_id", "position")
        .values_list("item_id", "passage__external_id")
    )
    for item_id, passage in rows:
        passages.setdefault(item_id, []).append(passage)
    items, _ = driver_rows(Item.objects.filter(study=study).values_list("id", "position", "query__external_id"))
    return {item_id: (position, query, passages.get(item_id, [])) for item_id, position, query in items}


def driver_rows(rows: QuerySet) -> tuple[list[tuple], int]:
    """The rows of a values_list query as the database driver gives them, fetched at once, and
    how many columns it has: Django's row iterator (chunks of 100 rows, a converter per value,
    even a bool) took about a quarter of the time of reading 300K judgments. For integer,
    boolean, text and date-time columns only (a date-time comes naive in UTC from SQLite, aware
    from Postgres): a JSON column needs the ORM's decoding."""
    sql, params = rows.query.sql_with_params()
    with connections[rows.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall(), len(cursor.description)


def streamed_driver_rows(rows: QuerySet, size: int = 5000) -> Iterator[tuple]:
    """driver_rows one at a time, fetched `size` at a time through Django's chunked cursor (a
    server-side cursor on Postgres), for reads too large to hold at once: a collection's
    passages. A JSON column comes as its text on both backends (Django's Postgres connections
    load jsonb as text): json.loads it."""
    sql, params = rows.query.sql_with_params()
    with connections[rows.db].chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while fetched := cursor.fetchmany(size):
            yield from fetched


def _int_columns(rows: QuerySet) -> np.ndarray:
    """The integer (or boolean) columns of a values_list query as a rows x columns array."""
    fetched, width = driver_rows(rows)
    flat = np.fromiter(itertools.chain.from_iterable(fetched), dtype=np.int64, count=len(fetched) * width)
    return flat.reshape(len(fetched), width)


def usernames(user_ids: Iterable[int]) -> dict[int, str]:
    """user id -> username, read a chunk of ids per query."""
    names = {}
    for chunk in chunks(list(user_ids)):
        names.update(get_user_model().objects.filter(pk__in=chunk).values_list("id", "username"))
    return names


@dataclass(frozen=True)
class ProxyItems:
    """Work items in display order as parallel arrays (one object per item and candidate took
    seconds at 100K items): `ids`, `gold` (the first gold's display position, -1 for none) and
    `candidates` (how many were shown)."""

    ids: np.ndarray
    gold: np.ndarray
    candidates: np.ndarray

    def rows(self, item_ids: np.ndarray) -> np.ndarray:
        """The row of each of `item_ids`, every one of which must be among the items."""
        return _rows_of(self.ids, item_ids)

    def take(self, rows: np.ndarray) -> ProxyItems:
        """The items at `rows` (indices or a mask), in that order."""
        return ProxyItems(self.ids[rows], self.gold[rows], self.candidates[rows])


def _rows_of(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Where each of `wanted` is in `ids` (unique, in any order; each of `wanted` among them)."""
    order = np.argsort(ids)
    return order[np.searchsorted(ids, wanted, sorter=order)]


def proxy_items(study: Study) -> ProxyItems:
    """Every formal work item of the study, as `shown_items` gives them, in columns: one row per
    item, its candidates counted and its first gold found by the database (reading every
    candidate instead, and the gold ones again, was a third of the report's reading)."""
    ids, candidates, gold = _int_columns(
        Item.objects.filter(study=study, role=Item.Role.WORK)
        .values("id")  # grouped by the item alone
        .annotate(
            shown=Count("candidates"),
            gold=Coalesce(Min("candidates__position", filter=Q(candidates__is_gold=True)), -1),
        )
        .order_by("position")
        .values_list("id", "shown", "gold")
    ).T
    return ProxyItems(ids, gold, candidates)


@dataclass(frozen=True)
class ItemLabel:
    """What an error-analysis list shows of an item: its display position, query and gold."""

    id: int
    position: int
    query: str
    gold: int | None
    gold_passage: str | None


def item_labels(item_ids: Iterable[int]) -> dict[int, ItemLabel]:
    """item id -> its label, for the few items an error-analysis list names (read in chunks,
    not for every item of the study)."""
    labels = {}
    for chunk in chunks(sorted(set(item_ids))):
        golds: dict[int, tuple[int, str]] = {}
        gold_rows = (
            ItemCandidate.objects.filter(item_id__in=chunk, is_gold=True)
            .order_by("item_id", "position")
            .values_list("item_id", "position", "passage__external_id")
        )
        for item_id, position, passage in gold_rows:
            golds.setdefault(item_id, (position, passage))
        for item_id, position, query in Item.objects.filter(pk__in=chunk).values_list(
            "id", "position", "query__external_id"
        ):
            gold, passage = golds.get(item_id, (None, None))
            labels[item_id] = ItemLabel(item_id, position, query, gold, passage)
    return labels


@dataclass(frozen=True)
class ProxyChoices:
    """Every counted judgment with a choice, as parallel arrays: `item_ids`, `annotators` (an
    index into `names`), `positions` (the display position chosen) and `chose_gold`."""

    item_ids: np.ndarray
    annotators: np.ndarray
    names: tuple[str, ...]
    positions: np.ndarray
    chose_gold: np.ndarray


def proxy_choices(study: Study) -> ProxyChoices:
    """What each counted judgment chose, as the position shown; judgments without a choice
    (labels, ratings) are not proxy answers and are left out. Integer columns only (the gold
    flag of the chosen candidate comes as 0/1 or a bool, an integer either way), the names read
    apart."""
    rows = _int_columns(
        counted_judgments(study)
        .filter(choice__isnull=False)
        .order_by()
        .values_list("item_id", "annotator_id", "choice__position", "choice__is_gold")
    )
    annotator_ids, annotators = np.unique(rows[:, 1], return_inverse=True)
    names = usernames(annotator_ids.tolist())
    return ProxyChoices(
        rows[:, 0],
        annotators,
        tuple(names[pk] for pk in annotator_ids.tolist()),
        rows[:, 2],
        rows[:, 3].astype(bool),
    )


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


def run_scores(run: Run, study: Study) -> dict[tuple[int, int], tuple[float, int]]:
    """(query id, passage id) -> (score, rank) for the run's stored hits on the study's queries
    and shown passages. Subqueries, not lists of ids: the SQL stays the same size at any study
    size (SQLite refuses an IN list of a few thousand ids as an expression tree too deep)."""
    rows = Hit.objects.filter(
        run=run,
        query_id__in=Item.objects.filter(study=study).values("query_id"),
        passage_id__in=ItemCandidate.objects.filter(item__study=study).values("passage_id"),
    ).values_list("query_id", "passage_id", "score", "rank")
    return {(query_id, passage_id): (score, rank) for query_id, passage_id, score, rank in rows.iterator(10000)}


@dataclass(frozen=True)
class ShownAnswer:
    """A counted judgment as the position analysis reads it: how many candidates its item
    shows, the gold's item position (proxy items; None without one), the item position chosen
    or selected, and the order the annotator saw (item positions, first shown first; None where
    not recorded)."""

    candidates: int
    gold: int | None
    chosen: tuple[int, ...]
    shown_order: list[int] | None


def shown_answers(study: Study) -> list[ShownAnswer]:
    """Every counted judgment of the study with what the position analysis needs (see
    ShownAnswer): two statements, one per item and one per judgment."""
    items = {
        item_id: (candidates, None if gold < 0 else gold)
        for item_id, candidates, gold in Item.objects.filter(study=study, role=Item.Role.WORK)
        .values("id")
        .annotate(
            shown=Count("candidates"),
            gold=Coalesce(Min("candidates__position", filter=Q(candidates__is_gold=True)), -1),
        )
        .values_list("id", "shown", "gold")
    }
    rows = counted_judgments(study).order_by().values_list("item_id", "choice__position", "selections", "shown_order")
    answers = []
    for item_id, choice, selections, order in rows.iterator(10000):
        candidates, gold = items[item_id]
        chosen = (choice,) if choice is not None else tuple(selections or ())
        answers.append(ShownAnswer(candidates, gold, chosen, order))
    return answers


@dataclass(frozen=True)
class LabelAnswer:
    """One counted judgment of a label study, as the statistics read it."""

    item_id: int
    annotator: str
    label: int | None
    selections: tuple[int, ...]
    spans: tuple[dict, ...]
    rubric: dict
    seconds: float | None


def counted_label_answers(study: Study) -> list[LabelAnswer]:
    """What each counted judgment answered: its label (or selected positions), spans, rubric
    and the seconds the annotator reported."""
    rows = (
        counted_judgments(study)
        .order_by("item_id", "annotator__username")
        .values_list("item_id", "annotator__username", "label", "selections", "spans", "rubric", "seconds")
    )
    return [
        LabelAnswer(item_id, annotator, label, tuple(selections or ()), tuple(spans or ()), rubric or {}, seconds)
        for item_id, annotator, label, selections, spans, rubric, seconds in rows
    ]


def gold_outcomes(study: Study) -> list[tuple[str, bool]]:
    """(annotator, answered correctly) for every counted judgment of a hidden gold item whose
    answer is known: the input of per-annotator gold accuracy."""
    judgments = gold_judgments(study).select_related("item__study", "annotator", "choice").order_by("id")
    outcomes = []
    for judgment in judgments:
        correct = is_correct(judgment.item, judgment)
        if correct is not None:
            outcomes.append((judgment.annotator.username, correct))
    return outcomes


def span_texts(study: Study, item_ids: Iterable[int], target: str) -> dict[int, str]:
    """item id -> the text whose character offsets the item's spans of `target` count."""
    items = Item.objects.filter(study=study, pk__in=set(item_ids)).select_related("query")
    return {item.pk: span_target_text(study, item, target) for item in items}


def adjudicated_answers(study: Study) -> dict[int, tuple[int | None, tuple[int, ...]]]:
    """item id -> staff's final (label, selected positions) for the items they adjudicated."""
    rows = Adjudication.objects.filter(item__study=study).values_list("item_id", "label", "selections")
    return {item_id: (label, tuple(selections or ())) for item_id, label, selections in rows}


def report_fingerprint(study: Study, runs: Iterable[Run]) -> str:
    """A digest of everything a study report depends on. Any new, voided or excluded judgment,
    any block, adjudication or send-back, any change to items, known answers, candidates, the study's
    settings or the runs' hits changes it.

    The large tables are summed up by the database, not read (reading every item was about a
    third of the cost of serving a cached report at 100K items). A count and the largest id
    show any insertion or deletion, since ids only grow (SQLite's AUTOINCREMENT and Postgres'
    sequences never give one out again). Candidates are never edited; judgments are only voided,
    which is never undone (the count of voided judgments shows each), or revised by their
    annotator, which records a JudgmentRevision first (their count and largest id show each). Which judgments count
    follows from these, the items' roles and the blocks. Roles and known answers are edited:
    the items that are not plain work items (hidden gold, qualification, or with a known
    answer) are listed."""
    every = Judgment.objects.filter(item__study=study).aggregate(
        count=Count("id"), last=Max("id"), voided=Count("id", filter=Q(voided=True)), last_voided=Max("voided_at")
    )
    revisions = JudgmentRevision.objects.filter(judgment__item__study=study).aggregate(
        count=Count("id"), last=Max("id")
    )
    study_items = Item.objects.filter(study=study)
    items = {
        **study_items.aggregate(count=Count("id"), last=Max("id")),
        "not_plain_work": sorted(
            study_items.exclude(role=Item.Role.WORK, expected_label__isnull=True).values_list(
                "id", "role", "expected_label"
            )
        ),
    }
    candidates = ItemCandidate.objects.filter(item__study=study).aggregate(
        count=Count("id"), last=Max("id"), golds=Count("id", filter=Q(is_gold=True))
    )
    blocks = sorted(StudyBlock.objects.filter(study=study).values_list("annotator_id", "exclude_judgments"))
    blocked_everywhere = sorted(
        AnnotatorProfile.objects.filter(
            Exists(Judgment.objects.filter(annotator=OuterRef("user"), item__study=study)), blocked=True
        ).values_list("user_id", flat=True)
    )
    adjudications = sorted(
        Adjudication.objects.filter(item__study=study).values_list(
            "item_id", "choice_id", "label", "selections", "decided_at"
        )
    )
    run_states = [
        {"id": run.pk, "status": run.status, **Hit.objects.filter(run=run).aggregate(hits=Count("id"), last=Max("id"))}
        for run in sorted(runs, key=lambda run: run.pk)
    ]
    inputs = {
        "format": REPORT_FORMAT,
        "study": [
            study.kind,
            study.candidates_per_item,
            study.judgments_per_item,
            study.negatives_run_id,
            study.label_schema,
            study.context_left,
            study.context_right,
            study.candidate_order,
        ],
        "judgments": every,
        "revisions": revisions,
        "items": items,
        "candidates": candidates,
        "blocks": blocks,
        "blocked_everywhere": blocked_everywhere,
        "adjudications": adjudications,
        # Which items wait for a new round after being sent back (the reports' label sources).
        "reworks": Rework.objects.filter(item__study=study).aggregate(count=Count("id"), last=Max("id")),
        "runs": run_states,
        "judges": judge_answers_fingerprint(study),
        # Agreement over time is cut into the watch's batches; the competence models fitted depend
        # on the judgments and this limit.
        "batch_size": AgreementWatch.objects.filter(study=study).values_list("batch_size", flat=True).first(),
        "competence_judgments": settings.MARGINALIA_REPORT_COMPETENCE_JUDGMENTS,
    }
    condition = (study.parameters or {}).get(CONDITION_KEY)
    if condition:  # the post-editing condition (items' proposals are set with it, before any judgment)
        inputs["post_editing"] = condition
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
