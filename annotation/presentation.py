"""How the annotation page presents a study's items: the order of an item's candidates for each
annotator, and the keys that answer them. Pure rules on plain data, read by the payload
selectors (annotation.selectors, annotation.ui_selectors) and enforced by
annotation.services.presentation when staff set them.

Candidate order. An item's candidates have one canonical order, their `ItemCandidate.position`
(for proxy items a seeded shuffle that puts the gold at every position equally often). A study
whose `candidate_order` is "item" shows every annotator that order, as before. A study whose
order is "annotator" shows each annotator the item's candidates in a permutation of their own,
drawn from (study seed, item id, annotator id) alone: reproducible from the study seed, the same
on every reload, and independent of which candidate is the gold (nothing about the gold goes in,
so the shown position of the gold is as uniform as the shuffle). The permutation is recorded
with every judgment (`Judgment.shown_order`: the item positions in the order shown). Annotators
only ever see shown positions: the payload numbers candidates 0..k-1 as shown and answers by
position are read as shown positions.

Keys. Every option shows the key that picks it. Positional options (proxy candidates,
multi-select paragraphs, scales whose values are not 0..10) take the study's option keys in
order; scale values 0..10 take their own digit (t for 10) and a yes/no question y and n. The
item actions (skip, flag, unsure, undo, mark a span) have one key each. A study may change any
of them (`Study.keyboard`, only what differs from DEFAULT_KEYS) as long as no key does two
things and none is a key the page keeps for itself (RESERVED_KEYS, the scale's own keys).
"""

from __future__ import annotations

import random

from retrieval.errors import InputError
from retrieval.input_rules import is_digits

from .label_schema import study_schema
from .models import Study

# Keys that pick options by their place: 1-9, 0 for the tenth, then letters for options 11-20
# (k is at most 20).
DEFAULT_OPTION_KEYS = "1234567890abcdefghij"
# Scale values are picked by their own digit; 10 (the top of a 0-10 scale) by "t" for ten.
TEN_KEY = "t"
# A yes/no question (quotability's) answers with y and n.
YES_NO_KEYS = {0: "n", 1: "y"}
# One key per item action; "" turns an action's shortcut off (its button stays).
ACTIONS = ("skip", "flag", "unsure", "undo", "mark")
DEFAULT_KEYS = {"options": DEFAULT_OPTION_KEYS, "skip": "s", "flag": "r", "unsure": "u", "undo": "z", "mark": "m"}
# What the page keeps for itself, whatever the study says (Enter, Tab, Escape, the arrows and
# Space are not single characters, and a key must be one).
RESERVED_KEYS = {"?": "opens the list of shortcuts"}
ACTION_WORDS = {
    "skip": "skip the item",
    "flag": "flag the item as broken",
    "unsure": "mark the answer unsure",
    "undo": "take the last answer back",
    "mark": "mark the selected text as a span",
}


# --- candidate order ---------------------------------------------------------------------------


def annotator_order(seed: int, item_id: int, annotator_id: int, count: int) -> list[int]:
    """The item positions of an item's `count` candidates in the order one annotator sees them
    in a study shuffled per annotator: a permutation seeded by the study seed, the item and the
    annotator (random.Random seeds a text through SHA-512, the same on every platform)."""
    order = list(range(count))
    random.Random(f"{seed}:candidate-order:{item_id}:{annotator_id}").shuffle(order)
    return order


def shown_order(study: Study, item_id: int, annotator_id: int | None, count: int) -> list[int]:
    """The item positions in the order `annotator_id` sees the item's `count` candidates: the
    item's own order, or their permutation where the study shuffles per annotator (None, nobody
    in particular: a judge's prompt, a staff view, gets the item's order)."""
    if study.candidate_order == Study.CandidateOrder.ANNOTATOR and annotator_id is not None:
        return annotator_order(study.seed, item_id, annotator_id, count)
    return list(range(count))


def item_positions(order: list[int], shown) -> object:
    """The item position of the candidate at shown position `shown`, when `shown` is a whole
    number (or its digits) within the order; anything else is handed back as it is, for the
    answer's validation to refuse with its own words."""
    if isinstance(shown, bool):
        return shown
    if isinstance(shown, str) and is_digits(shown.strip()):
        shown = int(shown.strip())
    if isinstance(shown, int) and 0 <= shown < len(order):
        return order[shown]
    return shown


def shown_position(order: list[int] | None, position: int) -> int | None:
    """Where the candidate at item position `position` was shown, by a recorded order; None
    when the order says nothing about it."""
    if order is None:
        return None
    try:
        return order.index(position)
    except ValueError:
        return None


# --- keys ----------------------------------------------------------------------------------------


def study_keys(study: Study) -> dict:
    """The study's keys: DEFAULT_KEYS with the study's own choices over them."""
    return {**DEFAULT_KEYS, **(study.keyboard or {})}


def value_keys(values: list[int], *, yes_no: bool, option_keys: str) -> list[str]:
    """The key of each scale or rubric value: y/n for a yes/no question, the value's digit (t for
    10) on 0-10 scales, else the option keys by place ("" past the last one)."""
    if yes_no and values == [0, 1]:
        return [YES_NO_KEYS[value] for value in values]
    if all(0 <= value <= 10 for value in values):
        return [TEN_KEY if value == 10 else str(value) for value in values]
    return [option_keys[index] if index < len(option_keys) else "" for index in range(len(values))]


def answer_keys(study: Study) -> set[str]:
    """The keys a label study's scale and rubric values own whatever the option keys are (their
    digits, t, y and n): the item actions must not take them."""
    if study.kind == Study.Kind.PROXY:
        return set()
    schema = study_schema(study)
    yes_no = study.kind == Study.Kind.QUOTABILITY
    scales = [] if schema["multi_select"] else [schema["values"]]
    scales += [field["values"] for field in schema["rubric"]]
    owned = set()
    for values in scales:
        keys = value_keys(values, yes_no=yes_no, option_keys="")
        owned.update(key for key in keys if key)
    return owned


def validate_keyboard(raw, *, fixed: set[str] = frozenset(), options_needed: int = 0) -> dict:
    """The study's key choices, normalised (letters lower case; only what differs from
    DEFAULT_KEYS is kept), or InputError naming `keyboard.<name>`: each action one character or
    "" (no shortcut), the option keys distinct characters, at least `options_needed` of them
    (the most options an item of the study shows), no key used twice, none reserved by the page
    or owned by the study's scale (`fixed`)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError('must be a JSON object of key names, e.g. {"skip": "k"}', field="keyboard")
    unknown = sorted(set(raw) - set(DEFAULT_KEYS))
    if unknown:
        raise InputError(f"unknown name; allowed: {', '.join(DEFAULT_KEYS)}", field=f"keyboard.{unknown[0]}")
    keys = {**DEFAULT_KEYS, **{name: _normalised(name, value) for name, value in raw.items()}}
    options = keys["options"]
    if not options:
        raise InputError('give the keys that pick options, e.g. "123456789"', field="keyboard.options")
    if len(set(options)) != len(options):
        raise InputError(f"{_repeated(options)!r} picks two options", field="keyboard.options")
    if len(options) < options_needed:
        raise InputError(
            f"{len(options)} keys, but items show up to {options_needed} options: give at least {options_needed}",
            field="keyboard.options",
        )
    owner = {}
    # The study's own choices last, so a clash is reported at the setting that was changed.
    names = sorted(("options", *ACTIONS), key=lambda name: name in raw)
    for name in names:
        for key in keys[name] if name == "options" else [keys[name]] if keys[name] else []:
            if key in RESERVED_KEYS:
                raise InputError(f"{key!r} is kept by the page: it {RESERVED_KEYS[key]}", field=f"keyboard.{name}")
            if key in fixed and name != "options":
                raise InputError(f"{key!r} answers this study's scale", field=f"keyboard.{name}")
            if key in owner:
                raise InputError(f"{key!r} is also the {_role(owner[key])} key", field=f"keyboard.{name}")
            owner[key] = name
    return {name: value for name, value in keys.items() if value != DEFAULT_KEYS[name]}


def _normalised(name: str, value) -> str:
    if not isinstance(value, str):
        raise InputError("must be a text of keys", field=f"keyboard.{name}")
    if any(character.isspace() or not character.isprintable() for character in value):
        raise InputError(
            "keys are visible characters (no spaces, tabs or control characters)", field=f"keyboard.{name}"
        )
    if name != "options" and len(value) > 1:
        raise InputError(f'one key, or "" for none; got {value!r}', field=f"keyboard.{name}")
    if len(value) > len(DEFAULT_OPTION_KEYS):
        raise InputError(f"at most {len(DEFAULT_OPTION_KEYS)} keys", field=f"keyboard.{name}")
    return value.lower()


def _repeated(keys: str) -> str:
    return next(key for index, key in enumerate(keys) if key in keys[:index])


def _role(name: str) -> str:
    return "option" if name == "options" else name
