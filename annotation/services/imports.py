"""Importing judgments collected elsewhere (a spreadsheet, another tool, a simulation).

One JSON object per line: `{"item": id, "annotator": name, "choice": passage external id}` for
proxy studies; for label studies `"label": value` (or, multi-select, `"selections": [display
positions]`) with `"spans"`, `"rubric"` and `"rationale"` as the study's schema asks; optionally
`"seconds"`. Every answer goes through labels.validate_answer, like a web submission. Other keys
are ignored, so the jsonl that /api/judgments/ exports can be read back.

All or nothing: the first bad row rejects the whole file (InputError naming the file, line and
field) and nothing is written. A row identical to a judgment already stored (same item,
annotator and answer) is not written again and is counted as `rejected`; re-importing a file
is therefore harmless and reports every row as rejected. A row that contradicts a stored
judgment is an error: judgments are immutable. Unknown annotators are created as inactive
users (they exist to own judgments, not to log in). Imported judgments take the item's free
slots like web judgments, so an item never gets more than `judgments_per_item`.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from retrieval.errors import InputError
from retrieval.input_rules import read_jsonl

from ..models import LIVE_ASSIGNMENT_STATES, Assignment, Item, ItemCandidate, Judgment, Study
from .labels import Answer, validate_answer
from .queue import clamp_seconds

# The keys of a row that make up a label study's answer (validate_answer's arguments).
LABEL_KEYS = ("label", "spans", "rubric", "rationale", "selections")


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
        _write(study, new_rows, str(path))
    return ImportResult(imported=len(new_rows), rejected=len(rows) - len(new_rows))


def _items_with_candidates(study: Study) -> dict[int, tuple[Item, dict[str, ItemCandidate]]]:
    candidates_by_item: dict[int, dict[str, ItemCandidate]] = defaultdict(dict)
    for candidate in ItemCandidate.objects.filter(item__study=study).select_related("passage"):
        candidates_by_item[candidate.item_id][candidate.passage.external_id] = candidate
    return {item.pk: (item, candidates_by_item[item.pk]) for item in Item.objects.filter(study=study)}


def _parse(study: Study, items, path: Path) -> list[_Row]:
    """The file's rows, read under the project's input rules (retrieval.input_rules)."""
    rows, seen, file = [], {}, str(path)
    proxy = study.kind == Study.Kind.PROXY
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
            answer = validate_answer(study, item, **_answer_parts(proxy, data, candidates))
        except InputError as exc:
            raise bad(exc.message, exc.field) from exc
        rows.append(_Row(line_number, item, annotator, answer, _seconds(data.get("seconds"), bad)))
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


def _answer_parts(proxy: bool, data: dict, candidates: dict[str, ItemCandidate]) -> dict:
    """validate_answer's arguments from a row: the chosen passage's candidate (proxy), else the
    label parts (absent keys are simply not given)."""
    if proxy:
        external_id = data.get("choice")
        if not isinstance(external_id, str) or external_id not in candidates:
            raise InputError(f"{external_id!r} is not one of the item's candidates", field="choice")
        return {"candidate": candidates[external_id]}
    return {key: data[key] for key in LABEL_KEYS if key in data}


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


def _write(study: Study, rows: list[_Row], file: str) -> None:
    users = _users(sorted({row.annotator for row in rows}))
    rows_by_item: dict[int, list[_Row]] = defaultdict(list)
    for row in rows:
        rows_by_item[row.item.pk].append(row)
    now = timezone.now()
    for item_id, item_rows in rows_by_item.items():
        item = Item.objects.select_for_update().get(pk=item_id)
        live = list(item.assignments.filter(state__in=LIVE_ASSIGNMENT_STATES))
        free = [slot for slot in range(study.judgments_per_item) if slot not in {a.slot for a in live}]
        held = {a.annotator_id: a for a in live if a.state == Assignment.State.ACTIVE}
        for row in item_rows:
            user = users[row.annotator]
            assignment = held.pop(user.pk, None)
            if assignment is None:
                if not free:
                    raise InputError(
                        f"item {item_id} already has its {study.judgments_per_item} judgments",
                        file=file,
                        line=row.line,
                        field="item",
                    )
                assignment = Assignment.objects.create(
                    item=item,
                    annotator=user,
                    slot=free.pop(0),
                    state=Assignment.State.SUBMITTED,
                    expires_at=now,
                    submitted_at=now,
                )
            else:
                Assignment.objects.filter(pk=assignment.pk).update(state=Assignment.State.SUBMITTED, submitted_at=now)
            Judgment.objects.create(
                item=item,
                annotator=user,
                assignment=assignment,
                **row.answer.judgment_fields(),
                seconds=row.seconds,
                source=Judgment.Source.IMPORT,
            )


def _users(names: list[str]) -> dict:
    """Existing users by name; the others created inactive, with no usable password."""
    User = get_user_model()
    users = {user.get_username(): user for user in User.objects.filter(**{f"{User.USERNAME_FIELD}__in": names})}
    for name in names:
        if name not in users:
            user = User(**{User.USERNAME_FIELD: name}, is_active=False)
            user.set_unusable_password()
            user.save()
            users[name] = user
    return users
