"""Label schemas and the validation of every answer an annotator gives.

A study of a label kind (relevance, quotability) carries a `label_schema` (one JSON format, see
`validate_schema`); a proxy study answers by choosing one of the item's candidates and has no
schema. `validate_answer` is the single place that turns what a client sent into an `Answer`
ready to store: the web form, the REST API, qualification rounds and `import_judgments` all go
through it, so a judgment can never hold a value the study does not allow. `is_correct`
compares an answer with an item's known answer (the gold candidate of a proxy item, or the
`expected_label` of a gold or qualification item) for qualification, gold accuracy and
adjudication.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from retrieval.errors import InputError
from retrieval.input_rules import parse_integer

from ..label_schema import default_schema, matches_expected, study_schema, validate_schema
from ..models import Item, ItemCandidate, Study
from ..selectors import span_target_text
from .preference_answers import validate_preference_answer

MAX_RATIONALE_CHARS = 10_000
MAX_SPANS = 50
# The schema rules live in annotation/label_schema.py (the payload selectors read them too); they
# are re-exported here beside the answer rules.
__all__ = [
    "Answer",
    "default_schema",
    "is_correct",
    "study_schema",
    "validate_answer",
    "validate_expected",
    "validate_schema",
]


@dataclass(frozen=True)
class Answer:
    """A validated answer, field for field what a Judgment (or QualificationAnswer) stores."""

    choice: ItemCandidate | None = None
    label: int | dict | None = None  # a scale value, or a preference answer (annotation/preference_schema.py)
    spans: list[dict] = field(default_factory=list)
    rubric: dict[str, int] = field(default_factory=dict)
    rationale: str = ""
    selections: list[int] = field(default_factory=list)

    def judgment_fields(self) -> dict:
        return {
            "choice": self.choice,
            "label": self.label,
            "spans": self.spans,
            "rubric": self.rubric,
            "rationale": self.rationale,
            "selections": self.selections,
        }


# --- answers ------------------------------------------------------------------------------------


def validate_answer(
    study: Study,
    item: Item,
    *,
    candidate: ItemCandidate | None = None,
    position=None,
    label=None,
    spans=None,
    rubric=None,
    rationale="",
    selections=None,
    shown: Sequence[ItemCandidate] | None = None,
) -> Answer:
    """The answer to `item` checked against the study's kind and schema, or InputError naming
    the field (position/candidate, label, spans, rubric.<name>, rationale, selections).
    `shown` is the item's candidates in display order, their passages loaded, when the caller
    has them (an import reads every item's at once); otherwise they are read here.

    Proxy: one candidate (the ItemCandidate or its display position); nothing else.
    Preference: the preferred candidate of a pair, or the label of a tie, "both bad" or a
    list's ranking (services/preference_answers.py).
    Label kinds: a label from the schema's values (an int, or its digits as text from a form),
    unless the schema is multi-select, where `selections` lists the chosen display positions
    (possibly none); spans, rubric and rationale as the schema allows or requires.
    """
    if study.kind == Study.Kind.PROXY:
        _refuse_extras(label=label, spans=spans, rubric=rubric, rationale=rationale, selections=selections)
        return Answer(choice=_proxy_choice(item, candidate, position, shown))
    if study.kind == Study.Kind.PREFERENCE:
        extras = {"spans": spans, "rubric": rubric, "rationale": rationale, "selections": selections}
        choice, answer = validate_preference_answer(
            study, item, candidate=candidate, position=position, label=label, extras=extras, shown=shown
        )
        return Answer(choice=choice, label=answer)
    if candidate is not None or position is not None:
        raise InputError("this study takes a label, not a chosen candidate", field="position")
    schema = study_schema(study)
    if schema["multi_select"]:
        if label is not None:
            raise InputError("this study asks to select the matching passages, not for a label", field="label")
        chosen, value = _selections(item, selections, shown=shown), None
    else:
        if selections:
            raise InputError("this study asks for one label, not a selection", field="selections")
        chosen, value = [], _integer_in(label, schema["values"], "label")
    return Answer(
        label=value,
        spans=_spans(study, item, schema, spans, shown),
        rubric=_rubric(schema["rubric"], rubric),
        rationale=_rationale(schema["rationale"], rationale),
        selections=chosen,
    )


def validate_expected(study: Study, item: Item, expected):
    """A gold or qualification item's known answer in the form `is_correct` compares: a label
    from the schema's values, or (multi-select) the sorted list of the right positions."""
    if study.kind == Study.Kind.PROXY:
        raise InputError("proxy items know their answer through the gold candidate", field="expected_label")
    if study.kind == Study.Kind.PREFERENCE:
        raise InputError("preference items have no known answer to check annotators against", field="expected_label")
    schema = study_schema(study)
    if schema["multi_select"]:
        return _selections(item, expected, field_name="expected_label")
    return _integer_in(expected, schema["values"], "expected_label")


def is_correct(item: Item, answer) -> bool | None:
    """Whether `answer` (an Answer, a Judgment or a QualificationAnswer: anything with choice,
    label and selections) matches the item's known answer; None when the item has none.

    A proxy item's known answer is its gold candidate; a label item's is `expected_label`,
    compared by `label_schema.matches_expected`."""
    if item.study.kind == Study.Kind.PROXY:
        if answer.choice is not None and answer.choice.is_gold:
            return True
        if not item.candidates.filter(is_gold=True).exists():
            return None
        return False
    if item.expected_label is None:
        return None
    return matches_expected(item.expected_label, label=answer.label, selections=answer.selections)


def _refuse_extras(**parts) -> None:
    for name, value in parts.items():
        if value not in (None, "", [], {}):
            raise InputError("a proxy study takes only the chosen candidate", field=name)


def _proxy_choice(
    item: Item, candidate: ItemCandidate | None, position, shown: Sequence[ItemCandidate] | None
) -> ItemCandidate:
    if candidate is None and position is None:
        raise InputError("choose one of the candidates", field="position")
    if candidate is not None:
        if candidate.item_id != item.pk or (position is not None and candidate.position != position):
            raise InputError("that candidate is not one of this item's", field="candidate")
        return candidate
    index = _integer(position, "position")
    if shown is not None:
        found = next((option for option in shown if option.position == index), None)
    else:
        found = ItemCandidate.objects.filter(item=item, position=index).first()
    if found is None:
        raise InputError(f"this item has no candidate at position {index}", field="position")
    return found


def _integer(value, field_name: str) -> int:
    """An int, or its ASCII digits as text (HTML forms send text; '٣' and '1_0' are not
    numbers); never a bool or a float."""
    if isinstance(value, str):
        try:
            return parse_integer(value.strip(), field=field_name)
        except InputError:
            raise InputError(f"must be an integer, got {value!r}", field=field_name) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"must be an integer, got {value!r}", field=field_name)
    return value


def _integer_in(value, allowed: list[int], field_name: str) -> int:
    if value is None:
        raise InputError(f"required: one of {allowed}", field=field_name)
    number = _integer(value, field_name)
    if number not in allowed:
        raise InputError(f"{number} is not one of {allowed}", field=field_name)
    return number


def _selections(
    item: Item, selections, *, field_name: str = "selections", shown: Sequence[ItemCandidate] | None = None
) -> list[int]:
    if selections is None:
        raise InputError("required: the positions selected (an empty list when none)", field=field_name)
    if not isinstance(selections, (list, tuple)):
        raise InputError("must be a list of candidate positions", field=field_name)
    positions = [_integer(value, field_name) for value in selections]
    if len(set(positions)) != len(positions):
        raise InputError(f"a position is selected twice: {positions}", field=field_name)
    positions_shown = (
        {candidate.position for candidate in shown}
        if shown is not None
        else set(item.candidates.values_list("position", flat=True))
    )
    outside = sorted(set(positions) - positions_shown)
    if outside:
        raise InputError(f"this item has no candidate at position {outside[0]}", field=field_name)
    return sorted(positions)


def _spans(study: Study, item: Item, schema: dict, spans, shown: Sequence[ItemCandidate] | None) -> list[dict]:
    """Character ranges [start, end) into the text the annotator was shown for the schema's
    target, sorted; a span's target defaults to the schema's."""
    spans = [] if spans is None else spans
    if not isinstance(spans, list):
        raise InputError("must be a list of {target, start, end} objects", field="spans")
    target = schema["spans"]
    if spans and target is None:
        raise InputError("this study does not ask for spans", field="spans")
    if not spans:
        if schema["spans_required"]:
            raise InputError(f"mark at least one span of the {target}", field="spans")
        return []
    if len(spans) > MAX_SPANS:
        raise InputError(f"at most {MAX_SPANS} spans", field="spans")
    length = len(span_target_text(study, item, target, shown))
    cleaned = set()
    for index, span in enumerate(spans):
        where = f"spans[{index}]"
        if not isinstance(span, dict) or not {"start", "end"} <= span.keys() or set(span) - {"target", "start", "end"}:
            raise InputError("must be an object {target, start, end}", field=where)
        if span.get("target", target) != target:
            raise InputError(f"spans mark the {target}, not {span.get('target')!r}", field=f"{where}.target")
        start, end = _integer(span["start"], f"{where}.start"), _integer(span["end"], f"{where}.end")
        if not 0 <= start < end <= length:
            raise InputError(
                f"[{start}, {end}) is not a non-empty range within the {target}'s {length} characters",
                field=where,
            )
        cleaned.add((start, end))
    return [{"target": target, "start": start, "end": end} for start, end in sorted(cleaned)]


def _rubric(fields: list[dict], rubric) -> dict[str, int]:
    """Every rubric field answered with one of its values (all fields are required)."""
    rubric = {} if rubric is None else rubric
    if not isinstance(rubric, dict):
        raise InputError("must be an object mapping rubric fields to values", field="rubric")
    known = {entry["name"]: entry for entry in fields}
    unknown = sorted(set(rubric) - known.keys())
    if unknown:
        raise InputError("this study has no such rubric field", field=f"rubric.{unknown[0]}")
    return {name: _integer_in(rubric.get(name), entry["values"], f"rubric.{name}") for name, entry in known.items()}


def _rationale(mode: str, rationale) -> str:
    rationale = "" if rationale is None else rationale
    if not isinstance(rationale, str):
        raise InputError("must be text", field="rationale")
    rationale = rationale.strip()
    if mode == "none" and rationale:
        raise InputError("this study does not ask for a rationale", field="rationale")
    if mode == "required" and not rationale:
        raise InputError("explain your answer: a rationale is required", field="rationale")
    if len(rationale) > MAX_RATIONALE_CHARS:
        raise InputError(f"at most {MAX_RATIONALE_CHARS} characters", field="rationale")
    return rationale
