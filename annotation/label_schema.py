"""The label schema of relevance and quotability studies: one JSON format, normalised here.

{"scale": "binary" | "graded-0-2" | "graded-0-3" | "0-10", "values": [ints, ascending, drawn from
the scale], "value_labels": {"0": display name, ...}, "question": text shown to annotators,
"spans": null | "query" | "passage", "spans_required": bool, "rubric": [{"name", "values",
"labels"}], "rationale": "none" | "optional" | "required", "multi_select": bool}

`validate_schema` fills every default (so readers never guess) and names the offending key in
its InputError (`label_schema.<key>`). Pure functions on plain data: the annotator payloads and
the answer validation (services/labels.py) both read schemas through `study_schema`.
"""

from __future__ import annotations

from retrieval.errors import InputError

from .models import Study
from .preference_schema import validate_preference_schema

SCALES: dict[str, list[int]] = {
    "binary": [0, 1],
    "graded-0-2": [0, 1, 2],
    "graded-0-3": [0, 1, 2, 3],
    "0-10": list(range(11)),
}
SPAN_TARGETS = ("query", "passage")
RATIONALE_MODES = ("none", "optional", "required")
RELEVANCE_QUESTION = "Is this passage relevant to the query?"
QUOTABILITY_QUESTION = "Does this paragraph contain an excerpt that would be appropriate to quote in the next sentence?"
MULTI_SELECT_QUESTION = (
    "Which of these paragraphs contain an excerpt that would be appropriate to quote in the next sentence?"
)
# Display names a scale gets when the schema names none; keys are the values as strings (JSON keys).
_DEFAULT_VALUE_LABELS = {
    (Study.Kind.RELEVANCE, "binary"): {"0": "Not relevant", "1": "Relevant"},
    (Study.Kind.RELEVANCE, "graded-0-2"): {"0": "Not relevant", "1": "Partially relevant", "2": "Highly relevant"},
    (Study.Kind.RELEVANCE, "graded-0-3"): {
        "0": "Irrelevant",
        "1": "Related",
        "2": "Highly relevant",
        "3": "Perfectly relevant",
    },
    (Study.Kind.QUOTABILITY, "binary"): {"0": "No", "1": "Yes"},
}
SCHEMA_KEYS = frozenset(
    {"scale", "values", "value_labels", "question", "spans", "spans_required", "rubric", "rationale", "multi_select"}
)
RUBRIC_KEYS = frozenset({"name", "values", "labels"})


def default_schema(kind: str) -> dict:
    """The normalised schema a study of `kind` gets when none is given: binary relevance, or the
    quote-recommendation paper's yes/no quotability question. Proxy studies have none ({})."""
    if kind == Study.Kind.PROXY:
        return {}
    if kind not in (Study.Kind.RELEVANCE, Study.Kind.QUOTABILITY):
        raise InputError(f"unknown study kind {kind!r}", field="kind")
    return validate_schema({"scale": "binary"}, kind=kind)


def validate_schema(schema: dict | None, *, kind: str = Study.Kind.RELEVANCE) -> dict:
    """The schema with every default filled in, or InputError naming the offending field
    (`label_schema.<key>`). See the issue-5 format: scale, values, value_labels, question,
    spans (+ spans_required), rubric, rationale, multi_select."""
    schema = {} if schema is None else schema
    if not isinstance(schema, dict):
        raise _schema_error("label_schema", "must be a JSON object")
    unknown = sorted(set(schema) - SCHEMA_KEYS)
    if unknown:
        raise _schema_error(unknown[0], f"unknown key; allowed: {', '.join(sorted(SCHEMA_KEYS))}")
    multi_select = _schema_bool(schema, "multi_select")
    scale = schema.get("scale", "binary")
    if scale not in SCALES:
        raise _schema_error("scale", f"must be one of {', '.join(SCALES)}, got {scale!r}")
    values = _schema_values(schema.get("values", SCALES[scale]), "values", allowed=SCALES[scale])
    value_labels = _schema_value_labels(
        schema.get("value_labels", _DEFAULT_VALUE_LABELS.get((kind, scale), {})), values, "value_labels"
    )
    question = schema.get("question", _default_question(kind, multi_select))
    if not isinstance(question, str) or not question.strip():
        raise _schema_error("question", "must be a non-empty text")
    spans = schema.get("spans")
    if spans is not None and spans not in SPAN_TARGETS:
        raise _schema_error("spans", f"must be null or one of {', '.join(SPAN_TARGETS)}, got {spans!r}")
    if spans == "passage" and multi_select:
        raise _schema_error("spans", "a multi-select item shows several passages; mark spans on the query or none")
    spans_required = _schema_bool(schema, "spans_required")
    if spans_required and spans is None:
        raise _schema_error("spans_required", "needs a span target in 'spans'")
    rationale = schema.get("rationale", "none")
    if rationale not in RATIONALE_MODES:
        raise _schema_error("rationale", f"must be one of {', '.join(RATIONALE_MODES)}, got {rationale!r}")
    return {
        "scale": scale,
        "values": values,
        "value_labels": value_labels,
        "question": question.strip(),
        "spans": spans,
        "spans_required": spans_required,
        "rubric": _schema_rubric(schema.get("rubric", [])),
        "rationale": rationale,
        "multi_select": multi_select,
    }


def study_schema(study: Study) -> dict:
    """The study's schema, normalised (stored schemas are normalised at creation; this also
    fills in defaults for studies created before a key existed). A preference study's is the
    preference schema (annotation/preference_schema.py), whose keys differ."""
    if study.kind == Study.Kind.PROXY:
        return {}
    if study.kind == Study.Kind.PREFERENCE:
        return validate_preference_schema(study.label_schema or None)
    return validate_schema(study.label_schema or None, kind=study.kind)


def _default_question(kind: str, multi_select: bool) -> str:
    if kind == Study.Kind.QUOTABILITY:
        return MULTI_SELECT_QUESTION if multi_select else QUOTABILITY_QUESTION
    return RELEVANCE_QUESTION


def _schema_error(key: str, message: str) -> InputError:
    return InputError(message, field=key if key == "label_schema" else f"label_schema.{key}")


def _schema_bool(schema: dict, key: str) -> bool:
    value = schema.get(key, False)
    if not isinstance(value, bool):
        raise _schema_error(key, f"must be true or false, got {value!r}")
    return value


def _schema_values(values, key: str, *, allowed: list[int] | None = None) -> list[int]:
    if not isinstance(values, list) or len(values) < 2:
        raise _schema_error(key, "must be a list of at least two integer values")
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise _schema_error(key, f"must hold integers only, got {values!r}")
    if len(set(values)) != len(values) or values != sorted(values):
        raise _schema_error(key, f"must be distinct and in ascending order, got {values!r}")
    if allowed is not None and not set(values) <= set(allowed):
        raise _schema_error(key, f"must be drawn from the scale's values {allowed}, got {values!r}")
    return list(values)


def _schema_value_labels(labels, values: list[int], key: str) -> dict[str, str]:
    """Every value's display name, keyed by the value as a string; unnamed values show the number."""
    if not isinstance(labels, dict):
        raise _schema_error(key, "must be an object mapping values to display names")
    known = {str(value) for value in values}
    for name, text in labels.items():
        if str(name) not in known:
            raise _schema_error(key, f"{name!r} is not one of the values {values}")
        if not isinstance(text, str) or not text.strip():
            raise _schema_error(key, f"the display name of {name!r} must be a non-empty text")
    names = {str(name): text.strip() for name, text in labels.items()}
    return {str(value): names.get(str(value), str(value)) for value in values}


def _schema_rubric(rubric) -> list[dict]:
    if not isinstance(rubric, list):
        raise _schema_error("rubric", "must be a list of fields")
    fields, seen = [], set()
    for index, entry in enumerate(rubric):
        key = f"rubric[{index}]"
        if not isinstance(entry, dict):
            raise _schema_error(key, "must be an object with name, values and optional labels")
        unknown = sorted(set(entry) - RUBRIC_KEYS)
        if unknown:
            raise _schema_error(f"{key}.{unknown[0]}", f"unknown key; allowed: {', '.join(sorted(RUBRIC_KEYS))}")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip() or not name.strip().isidentifier():
            raise _schema_error(f"{key}.name", f"must be a short name (letters, digits, underscores), got {name!r}")
        name = name.strip()
        if name in seen:
            raise _schema_error(f"{key}.name", f"duplicate rubric field {name!r}")
        seen.add(name)
        values = _schema_values(entry.get("values"), f"{key}.values")
        labels = _schema_value_labels(entry.get("labels", {}), values, f"{key}.labels")
        fields.append({"name": name, "values": values, "labels": labels})
    return fields


def matches_expected(expected, *, label, selections) -> bool:
    """Whether an answer equals a label item's known answer: the same value (a graded scale
    counts a neighbouring grade as wrong), or for multi-select (`expected` a list of positions)
    the same set of selected positions."""
    if isinstance(expected, list):
        return sorted(selections or []) == sorted(expected)
    return label == expected
