"""What a preference item asks, and how its answer is written down: one JSON format, normalised
here like label_schema.py does for the label kinds.

Schema (stored in `Study.label_schema` of a preference study): {"shape": "pairwise" | "listwise",
"list_size": candidates per item (2 for pairwise, 3 to MAX_LIST_SIZE for lists), "ties": whether
an answer may call candidates equally good, "bad": whether it may say that none of them is good
(the "both bad" answer), "question": the text annotators read}.

An answer (`Judgment.label`) is an ordered partition of the item's display positions, best group
first: {"order": [[1], [0]]} prefers the candidate shown second; {"order": [[0, 1]]} is a tie; a
list {"order": [[2], [0, 1]]} puts the third candidate first and the other two level behind it.
"Both bad" is {"both_bad": true}: no order at all. Every answer also keeps `shown`: the opaque
candidate ids in the order the annotator saw them, so the record of what was compared never
depends on another table. `Judgment.choice` is the candidate ranked first alone (None for a tie,
"both bad", or a first place shared).
"""

from __future__ import annotations

from retrieval.errors import InputError

SHAPES = ("pairwise", "listwise")
MAX_LIST_SIZE = 6
BOTH_BAD = "both_bad"
TIE = "tie"
PAIRWISE_QUESTION = "Which passage answers the query better?"
LISTWISE_QUESTION = "Put these passages in order: the one that answers the query best first."
SCHEMA_KEYS = frozenset({"shape", "list_size", "ties", "bad", "question"})


def validate_preference_schema(schema: dict | None) -> dict:
    """The schema with every default filled in, or InputError naming `label_schema.<key>`."""
    schema = {} if schema is None else schema
    if not isinstance(schema, dict):
        raise InputError("must be a JSON object", field="label_schema")
    unknown = sorted(set(schema) - SCHEMA_KEYS)
    if unknown:
        raise _error(unknown[0], f"unknown key; allowed: {', '.join(sorted(SCHEMA_KEYS))}")
    shape = schema.get("shape", "pairwise")
    if shape not in SHAPES:
        raise _error("shape", f"must be one of {', '.join(SHAPES)}, got {shape!r}")
    default_size = 2 if shape == "pairwise" else 4
    size = schema.get("list_size", default_size)
    if isinstance(size, bool) or not isinstance(size, int):
        raise _error("list_size", f"must be an integer, got {size!r}")
    if shape == "pairwise" and size != 2:
        raise _error("list_size", f"a pairwise item shows 2 candidates, got {size}")
    if shape == "listwise" and not 3 <= size <= MAX_LIST_SIZE:
        raise _error("list_size", f"a list shows 3 to {MAX_LIST_SIZE} candidates, got {size}")
    flags = {}
    for key in ("ties", "bad"):
        flags[key] = schema.get(key, True)
        if not isinstance(flags[key], bool):
            raise _error(key, f"must be true or false, got {flags[key]!r}")
    question = schema.get("question", PAIRWISE_QUESTION if shape == "pairwise" else LISTWISE_QUESTION)
    if not isinstance(question, str) or not question.strip():
        raise _error("question", "must be a non-empty text")
    return {"shape": shape, "list_size": size, **flags, "question": question.strip()}


def _error(key: str, message: str) -> InputError:
    return InputError(message, field=f"label_schema.{key}")


def answer_groups(label) -> list[list[int]] | None:
    """A stored answer's order (tie groups of display positions, best first), or None for
    "both bad" (and for anything that is not a preference answer)."""
    if not isinstance(label, dict) or label.get(BOTH_BAD):
        return None
    order = label.get("order")
    return order if isinstance(order, list) else None


def describe_preference(label) -> str:
    """A stored answer in words for staff pages, by the option numbers annotators saw (1-based):
    "2 > 1", "1 = 2", "3 > 1 = 2", "both bad"."""
    if isinstance(label, dict) and label.get(BOTH_BAD):
        return "both bad"
    groups = answer_groups(label)
    if not groups:
        return "—"
    return " > ".join(" = ".join(str(position + 1) for position in group) for group in groups)
