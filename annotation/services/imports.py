"""Importing judgments collected elsewhere (a spreadsheet, another tool, a simulation).

One JSON object per line: `{"item": id, "annotator": name, "choice": passage external id}` for
proxy studies; for label studies `"label": value` (or, multi-select, `"selections": [display
positions]`) with `"spans"`, `"rubric"` and `"rationale"` as the study's schema asks; for
preference studies `"preferred"`: the external id of the passage preferred, "tie" or "both_bad"
(pairs), or `"ranking"`: the item's passage external ids best first, a list of ids in place of
one id for passages tied, or "both_bad" (lists; pairs may use it too), or the exported `"label"`
(display positions); optionally `"seconds"`, and `"shown_order"` (the item positions in the
order the annotator saw them, as the export writes it; absent or null: not recorded). Every
answer goes through labels.validate_answer, like a web submission. Other keys are ignored, so
the jsonl that /api/judgments/ exports can be read back.

All or nothing: the first bad row rejects the whole file (InputError naming the file, line and
field) and nothing is written. A row identical to a judgment already stored (same item,
annotator and answer) is not written again and is counted as `rejected`; re-importing a file
is therefore harmless and reports every row as rejected. A row that contradicts a stored
judgment is an error: judgments are immutable. New judgments may only name annotator accounts:
a staff account, a superuser or an annotator blocked (everywhere or from the study) is an error.
Unknown annotators are created as inactive users (they exist to own judgments, not to log in).
Imported judgments take the item's free slots like web judgments, so an item never gets more
than `judgments_per_item`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from retrieval.chunks import chunks
from retrieval.errors import InputError
from retrieval.input_rules import read_jsonl
from retrieval.planner import refresh_statistics

from ..models import LIVE_ASSIGNMENT_STATES, Assignment, Item, ItemCandidate, Judgment, Study, StudyBlock
from ..preference_schema import BOTH_BAD, TIE
from .labels import Answer, validate_answer
from .live_counts import refresh_live_counts
from .locks import lock_rows
from .pools import settle_completed
from .preference_scheduling import advance_queries
from .queue import clamp_seconds

# The keys of a row that make up a label study's answer (validate_answer's arguments).
LABEL_KEYS = ("label", "spans", "rubric", "rationale", "selections")
# Writes go in bounded statements: locks and updates name at most ITEMS_PER_QUERY ids (one IN
# list of every item would be slow on Postgres and too deep for SQLite), lookups at most
# NAMES_PER_QUERY user names, inserts at most ROWS_PER_INSERT rows.
ITEMS_PER_QUERY = 1000
NAMES_PER_QUERY = 1000
ROWS_PER_INSERT = 1000


@dataclass(frozen=True)
class ImportResult:
    imported: int
    rejected: int

    def summary(self) -> dict:
        return {"imported": self.imported, "rejected": self.rejected}


@dataclass(frozen=True)
class _Row:
    line: int
    item: Item
    annotator: str
    answer: Answer
    seconds: float | None
    shown_order: list[int] | None


def import_judgments(study: Study, path: str | Path) -> ImportResult:
    """Read `path` into `study` in one transaction; see the module docstring for the rules."""
    path = Path(path)
    with transaction.atomic():
        items = _items_with_candidates(study)
        rows = _parse(study, items, path)
        stored = _stored_answers(study)
        new_rows = []
        for row in rows:
            previous = stored.get((row.item.pk, row.annotator))
            if previous is None:
                new_rows.append(row)
            elif previous != _comparable(**row.answer.judgment_fields()):
                raise InputError(
                    f"annotator '{row.annotator}' already judged item {row.item.pk} differently; "
                    "judgments are immutable",
                    file=str(path),
                    line=row.line,
                    field="choice" if row.answer.choice else "label",
                )
        names = {row.annotator for row in new_rows}
        users = _existing_users(names)
        _refuse_borrowed_identities(study, new_rows, users, str(path))
        _write(study, new_rows, _with_new_users(names, users), str(path))
        settle_completed(study)  # an adaptive pool decides the items the file completed
        # An adaptive preference study chooses its next pairs from these answers too.
        advance_queries(study, {row.item.query_id for row in new_rows})
    return ImportResult(imported=len(new_rows), rejected=len(rows) - len(new_rows))


def _items_with_candidates(study: Study) -> dict[int, tuple[Item, dict[str, ItemCandidate]]]:
    """Every item with its query and its candidates by passage id, in display order: all that
    validating a row reads, in three statements whatever the file's size."""
    candidates_by_item: dict[int, dict[str, ItemCandidate]] = defaultdict(dict)
    for candidate in (
        ItemCandidate.objects.filter(item__study=study).select_related("passage").order_by("item_id", "position")
    ):
        candidates_by_item[candidate.item_id][candidate.passage.external_id] = candidate
    return {
        item.pk: (item, candidates_by_item[item.pk])
        for item in Item.objects.filter(study=study).select_related("query")
    }


def _parse(study: Study, items, path: Path) -> list[_Row]:
    """The file's rows, read under the project's input rules (retrieval.input_rules)."""
    rows, seen, file = [], {}, str(path)
    for line_number, data in read_jsonl(path):

        def bad(message, field=None, line_number=line_number):
            return InputError(message, file=file, line=line_number, field=field)

        item_id = data.get("item")
        if isinstance(item_id, bool) or not isinstance(item_id, int):
            raise bad("must be an item id (an integer)", "item")
        if item_id not in items:
            raise bad(f"no item {item_id} in study {study.pk}", "item")
        item, candidates = items[item_id]
        annotator = data.get("annotator")
        if not isinstance(annotator, str) or not annotator.strip():
            raise bad("must be the annotator's user name", "annotator")
        annotator = annotator.strip()
        _check_username(annotator, bad)
        if (item_id, annotator) in seen:
            raise bad(
                f"duplicate (item {item_id}, annotator '{annotator}'), first on line {seen[item_id, annotator]}",
                "annotator",
            )
        seen[item_id, annotator] = line_number
        try:
            answer = validate_answer(study, item, **_answer_parts(study.kind, data, candidates))
        except InputError as exc:
            raise bad(exc.message, exc.field) from exc
        rows.append(
            _Row(
                line_number,
                item,
                annotator,
                answer,
                _seconds(data.get("seconds"), bad),
                _shown_order(data.get("shown_order"), len(candidates), bad),
            )
        )
    if not rows:
        raise InputError("the file has no judgments", file=file)
    return rows


def _check_username(name: str, bad) -> None:
    field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
    try:
        field.run_validators(name)
        if len(name) > field.max_length:
            raise ValidationError(f"longer than {field.max_length} characters")
    except ValidationError as exc:
        raise bad(f"not a valid user name: {' '.join(exc.messages)}", "annotator") from exc


def _seconds(value, bad) -> float | None:
    """A file's seconds must be a number (the web form's broken timer is forgiven, a file's is
    not); it is then capped as the web's are."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise bad("must be a number of seconds, 0 or more", "seconds")
    return clamp_seconds(value)


def _shown_order(value, candidates: int, bad) -> list[int] | None:
    """A recorded presentation order: every item position of the item's candidates once."""
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or any(isinstance(position, bool) or not isinstance(position, int) for position in value)
        or sorted(value) != list(range(candidates))
    ):
        raise bad(f"must list the item's candidate positions 0..{candidates - 1}, each once", "shown_order")
    return value


def _answer_parts(kind: str, data: dict, candidates: dict[str, ItemCandidate]) -> dict:
    """validate_answer's arguments from a row: the chosen passage's candidate (proxy), the
    preference in display positions (preference), else the label parts (absent keys are simply
    not given)."""
    if kind == Study.Kind.PROXY:
        return {"candidate": _candidate(data.get("choice"), candidates, "choice")}
    if kind == Study.Kind.PREFERENCE:
        return _preference_parts(data, candidates)
    return {**{key: data[key] for key in LABEL_KEYS if key in data}, "shown": list(candidates.values())}


def _candidate(external_id, candidates: dict[str, ItemCandidate], field: str) -> ItemCandidate:
    if not isinstance(external_id, str) or external_id not in candidates:
        raise InputError(f"{external_id!r} is not one of the item's candidates", field=field)
    return candidates[external_id]


def _preference_parts(data: dict, candidates: dict[str, ItemCandidate]) -> dict:
    """A preference row: `preferred` (an external id, "tie" or "both_bad"), `ranking` (external
    ids best first, tied ones as a list, or "both_bad") or an exported `label`, as the display
    positions validate_answer reads."""
    shown = list(candidates.values())
    given = [key for key in ("preferred", "ranking") if key in data]
    if len(given) > 1:
        raise InputError("give either 'preferred' (pairs) or 'ranking' (lists), not both", field="preferred")
    if not given:
        return {"label": _exported_answer(data.get("label")), "shown": shown}
    key, value = given[0], data[given[0]]
    if value == BOTH_BAD or (key == "preferred" and value == TIE):
        return {"label": value, "shown": shown}
    if key == "preferred":
        return {"candidate": _candidate(value, candidates, "preferred"), "shown": shown}
    if not isinstance(value, list):
        raise InputError("must be a list of the item's passage ids, best first, or 'both_bad'", field="ranking")
    groups = []
    for entry in value:
        members = entry if isinstance(entry, list) else [entry]
        groups.append([_candidate(external_id, candidates, "ranking").position for external_id in members])
    return {"label": {"ranking": groups}, "shown": shown}


def _exported_answer(label):
    """An exported preference label ({"order": ...} or {"both_bad": true}) as an answer."""
    if isinstance(label, dict) and label.get(BOTH_BAD) is True:
        return BOTH_BAD
    if isinstance(label, dict) and isinstance(label.get("order"), list):
        return {"ranking": label["order"]}
    raise InputError("give 'preferred' (pairs) or 'ranking' (lists)", field="preferred")


def _comparable(*, choice, label, spans, rubric, rationale, selections) -> str:
    """An answer as one string, so a re-imported row can be told identical to a stored one."""
    choice_id = choice if isinstance(choice, int) or choice is None else choice.pk
    return json.dumps([choice_id, label, spans, rubric, rationale, selections], sort_keys=True)


def _stored_answers(study: Study) -> dict[tuple[int, str], str]:
    return {
        (item_id, username): _comparable(
            choice=choice_id, label=label, spans=spans, rubric=rubric, rationale=rationale, selections=selections
        )
        for item_id, username, choice_id, label, spans, rubric, rationale, selections in Judgment.objects.filter(
            item__study=study
        ).values_list(
            "item_id", "annotator__username", "choice_id", "label", "spans", "rubric", "rationale", "selections"
        )
    }


def _existing_users(names: set[str]) -> dict:
    """The accounts already named in the file, by name, with their annotator profiles; asked for
    NAMES_PER_QUERY names at a time (a file may name thousands of crowd annotators)."""
    User = get_user_model()
    users = {}
    for chunk in chunks(sorted(names), NAMES_PER_QUERY):
        for user in User.objects.filter(**{f"{User.USERNAME_FIELD}__in": chunk}).select_related("annotator_profile"):
            users[user.get_username()] = user
    return users


def _refuse_borrowed_identities(study: Study, rows: list[_Row], users: dict, file: str) -> None:
    """New judgments may only be attributed to annotator accounts: never to staff or superusers
    (whose judgments would then count in the study's statistics), nor to annotators blocked
    everywhere or from this study. Names of no account are created below as inactive ones."""
    blocked_here = set(StudyBlock.objects.filter(study=study).values_list("annotator_id", flat=True))
    for row in rows:
        user = users.get(row.annotator)
        if user is None:
            continue
        profile = getattr(user, "annotator_profile", None)
        if user.is_staff or user.is_superuser:
            reason = "is a staff account"
        elif profile is not None and profile.blocked:
            reason = "is blocked from annotation"
        elif user.pk in blocked_here:
            reason = "is blocked from this study"
        else:
            continue
        message = f"'{row.annotator}' {reason}; imported judgments may only name annotator accounts"
        raise InputError(message, file=file, line=row.line, field="annotator")


@dataclass
class _Plan:
    """What the import writes: new assignments, the ACTIVE ones it completes (by id) and the
    judgments (each pointing at one or the other). `overfull` is the earliest row (by line) that
    found its item without a free slot; any such row refuses the file."""

    new_assignments: list[Assignment] = dataclasses.field(default_factory=list)
    completed: list[int] = dataclasses.field(default_factory=list)
    judgments: list[Judgment] = dataclasses.field(default_factory=list)
    overfull: _Row | None = None


def _write(study: Study, rows: list[_Row], users: dict, file: str) -> None:
    """Store the rows with a fixed number of statements per ITEMS_PER_QUERY items, however many
    rows: the items are locked (select_for_update) a chunk at a time and only then their live
    assignments read, so a web submission racing the import waits for the transaction and then
    finds the slots taken. Every row is placed before anything is written, so the row reported
    for a full item is the earliest in the file. bulk_create skips Judgment.save, whose one rule
    (a stored answer is never rewritten) concerns updates only; no receiver listens for these
    saves, and imports announce no annotation.events (those are for web judgments)."""
    rows_by_item: dict[int, list[_Row]] = defaultdict(list)
    for row in rows:
        rows_by_item[row.item.pk].append(row)
    plan, now = _Plan(), timezone.now()
    item_ids = sorted(rows_by_item)  # imports lock items in one order, so two cannot deadlock
    for chunk in chunks(item_ids, ITEMS_PER_QUERY):
        lock_rows(Item.objects.filter(pk__in=chunk))
        live: dict[int, list[Assignment]] = defaultdict(list)
        for assignment in Assignment.objects.filter(item_id__in=chunk, state__in=LIVE_ASSIGNMENT_STATES):
            live[assignment.item_id].append(assignment)
        for item_id in chunk:
            _place(study, rows_by_item[item_id], live[item_id], users, now, plan)
    if plan.overfull is not None:
        raise InputError(
            f"item {plan.overfull.item.pk} already has its {study.judgments_per_item} judgments",
            file=file,
            line=plan.overfull.line,
            field="item",
        )
    Assignment.objects.bulk_create(plan.new_assignments, batch_size=ROWS_PER_INSERT)
    for chunk in chunks(plan.completed, ITEMS_PER_QUERY):
        Assignment.objects.filter(pk__in=chunk).update(state=Assignment.State.SUBMITTED, submitted_at=now)
    Judgment.objects.bulk_create(plan.judgments, batch_size=ROWS_PER_INSERT)
    for chunk in chunks(item_ids, ITEMS_PER_QUERY):  # locked above
        refresh_live_counts(study, Item.objects.filter(pk__in=chunk))
    refresh_statistics(Assignment, Judgment)


def _place(study: Study, rows: list[_Row], live: list[Assignment], users: dict, now, plan: _Plan) -> None:
    """One item's rows into `plan`, as a web submission would take them: an annotator's ACTIVE
    assignment on the item is completed, anyone else takes the lowest free slot."""
    taken = {assignment.slot for assignment in live}
    free = [slot for slot in range(study.judgments_per_item) if slot not in taken]
    held = {a.annotator_id: a for a in live if a.state == Assignment.State.ACTIVE}
    for row in rows:
        user = users[row.annotator]
        assignment = held.pop(user.pk, None)
        if assignment is not None:
            plan.completed.append(assignment.pk)
        elif free:
            assignment = Assignment(
                item=row.item,
                annotator=user,
                slot=free.pop(0),
                state=Assignment.State.SUBMITTED,
                expires_at=now,
                submitted_at=now,
            )
            plan.new_assignments.append(assignment)
        else:
            if plan.overfull is None or row.line < plan.overfull.line:
                plan.overfull = row
            continue
        judgment = Judgment(
            item=row.item,
            annotator=user,
            assignment=assignment,
            **row.answer.judgment_fields(),
            seconds=row.seconds,
            shown_order=row.shown_order,
            source=Judgment.Source.IMPORT,
        )
        judgment.copy_item_fields()  # bulk_create does not call save()
        plan.judgments.append(judgment)


def _with_new_users(names: set[str], users: dict) -> dict:
    """`users` and, for the other names, new inactive accounts with no usable password."""
    User = get_user_model()
    created = []
    for name in sorted(names - users.keys()):
        user = User(**{User.USERNAME_FIELD: name}, is_active=False)
        user.set_unusable_password()
        created.append(user)
    User.objects.bulk_create(created, batch_size=ROWS_PER_INSERT)
    return {**users, **{user.get_username(): user for user in created}}
