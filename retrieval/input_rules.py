"""The one rule for input from outside — files given to commands, uploads, REST bodies, JSON typed
into forms: it is accepted whole or refused with one `InputError` naming the file, the line and
the field, before anything is written and without a traceback.

What every reader here enforces, the same on SQLite and Postgres:
- sizes are bounded before parsing: a whole file at most MAX_FILE_BYTES, a line of a line-based
  file at most MAX_LINE_BYTES, JSON nested at most MAX_JSON_DEPTH deep (counted on the raw text,
  so 100,000 levels never reach the parser's recursion);
- text is UTF-8, with or without a byte-order mark;
- no NUL character (Postgres cannot store one) and no lone surrogate (`"\\ud800"` decodes to a
  string no database can encode), in values or keys;
- every JSON number is one a column can hold: integers within 64 bits, floats finite (no NaN,
  Infinity or 1e400); `column_range` gives the narrower range of a particular integer column.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations

from .errors import InputError

MAX_JSON_DEPTH = 32
MAX_LINE_BYTES = 64 * 2**20
MAX_FILE_BYTES = 2 * 2**30
INT64_RANGE = (-(2**63), 2**63 - 1)
# More digits than any 64-bit integer has: not even converted (Python refuses 4,300 digits).
_MAX_INTEGER_DIGITS = 20

_FORBIDDEN_CHARACTER = re.compile("[\x00\ud800-\udfff]")
_JSON_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")
# Escapes that may decode to a NUL or a lone surrogate: JSON without any needs no walk for them.
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def json_type(value) -> str:
    """A parsed JSON value's type as JSON calls it, for error messages."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def character_problem(text: str) -> tuple[int, str] | None:
    """(index, what is wrong) for the first NUL or lone surrogate in `text`, else None."""
    match = _FORBIDDEN_CHARACTER.search(text)
    if match is None:
        return None
    if match.group() == "\x00":
        return match.start(), "contains a NUL character (U+0000), which cannot be stored"
    return match.start(), f"contains a lone surrogate (U+{ord(match.group()):04X}), which is not text"


def check_text(text: str, *, file: str | None = None, first_line: int = 1, field: str | None = None) -> str:
    """`text` itself, or an InputError at the line of its first NUL or lone surrogate."""
    problem = character_problem(text)
    if problem is not None:
        index, message = problem
        raise InputError(message, file=file, line=first_line + text.count("\n", 0, index), field=field)
    return text


def decode(data: bytes, file: str, first_line: int = 1) -> str:
    """UTF-8 with or without a BOM, free of NUL characters; a bad byte is reported with its line."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        raise InputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", file=file, line=line) from None
    return check_text(text, file=file, first_line=first_line)


def open_binary(path: Path):
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
    except IsADirectoryError:
        raise InputError("a folder, not a file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read the file: {exc.strerror}", file=str(path)) from None


def read_text(path: Path) -> str:
    """A whole text file, at most MAX_FILE_BYTES."""
    with open_binary(path) as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"larger than {MAX_FILE_BYTES} bytes", file=str(path))
    return decode(data, str(path))


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, decoded line without its line end), streamed; a line is at most
    MAX_LINE_BYTES."""
    with open_binary(path) as handle:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"line longer than {MAX_LINE_BYTES} bytes", file=str(path), line=number)
            yield number, decode(raw, str(path), number).rstrip("\r\n")


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a JSON-lines file."""
    for number, line in read_lines(path):
        if not line.strip():
            continue
        record = load_json(line, file=str(path), line=number)
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, got {json_type(record)}", file=str(path), line=number)
        yield number, record


class _Unstorable:
    """A parsed JSON number that no column can hold, with what is wrong with it; load_json
    refuses any before returning."""

    def __init__(self, problem: str):
        self.problem = problem


class _Parse:
    """json.loads hooks that turn unstorable numbers into _Unstorable and remember seeing one."""

    def __init__(self):
        self.unstorable = False

    def refuse(self, problem: str) -> _Unstorable:
        self.unstorable = True
        return _Unstorable(problem)

    def integer(self, digits: str):
        if len(digits.lstrip("-")) > _MAX_INTEGER_DIGITS:
            return self.refuse(f"integer with {len(digits.lstrip('-'))} digits is out of range")
        value = int(digits)
        low, high = INT64_RANGE
        return value if low <= value <= high else self.refuse(f"{value} is out of range {low}..{high}")

    def real(self, text: str):
        value = float(text)
        return value if math.isfinite(value) else self.refuse("not a finite number")

    def constant(self, name: str):
        return self.refuse(f"{name} is not a finite number")


def refuse_repeated_keys(file: str | None = None) -> Callable[[list[tuple[str, object]]], dict]:
    """An object_pairs_hook for load_json that refuses an object giving one key twice (json
    keeps the last silently; which one the sender meant is unknown)."""

    def hook(pairs: list[tuple[str, object]]) -> dict:
        data = dict(pairs)
        if len(data) != len(pairs):
            repeated = next(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
            raise InputError(f"key '{repeated}' appears twice in one object", file=file, field=repeated)
        return data

    return hook


def load_json(
    text: str,
    *,
    file: str | None = None,
    line: int | None = None,
    object_pairs_hook: Callable[[list[tuple[str, object]]], dict] | None = None,
):
    """Parse JSON under the rules above. `line` is the line of a JSON-lines file the text came
    from; for a whole file the line is computed where it can be."""
    _check_depth(text, file=file, line=line)
    hooks = _Parse()
    try:
        value = json.loads(
            text,
            parse_int=hooks.integer,
            parse_float=hooks.real,
            parse_constant=hooks.constant,
            object_pairs_hook=object_pairs_hook,
        )
    except json.JSONDecodeError as exc:
        where = line if line is not None else (exc.lineno if file is not None else None)
        raise InputError(f"not valid JSON: {exc.msg}", file=file, line=where) from None
    if hooks.unstorable or _SUSPECT_ESCAPE.search(text):
        problem = _first_value_problem(value, "")
        if problem is not None:
            field, message = problem
            raise InputError(message, file=file, line=line, field=field or None)
    return value


def _check_depth(text: str, *, file: str | None, line: int | None) -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH, counting brackets outside strings."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return
    # Strings become "" (they hold no raw line breaks in JSON), so line numbers stay right.
    structure = _JSON_STRING.sub('""', text)
    depth = 0
    for bracket in _JSON_BRACKET.finditer(structure):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            where = line if line is not None else (1 + structure.count("\n", 0, bracket.start()) if file else None)
            raise InputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", file=file, line=where)


def _first_value_problem(value, path: str) -> tuple[str, str] | None:
    """(JSON path, what is wrong) for the first value no column can hold; depth is bounded, so
    the recursion is too."""
    if isinstance(value, _Unstorable):
        return path, value.problem
    if isinstance(value, str):
        problem = character_problem(value)
        return (path, problem[1]) if problem else None
    if not isinstance(value, (dict, list)):
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        child = f"{path}.{key}".lstrip(".") if isinstance(key, str) else f"{path}[{key}]"
        if isinstance(key, str) and (problem := character_problem(key)):
            return child, f"key {problem[1]}"
        if found := _first_value_problem(item, child):
            return found
    return None


# How numbers are written on every path in (files, options, form fields): ASCII digits with an
# optional sign, reals with a point and an exponent. int() and float() also take other scripts'
# digits ('٣') and underscores ('1_0'), which no file format or form means as a number.
_ASCII_INTEGER = re.compile(r"[+-]?[0-9]+")
_ASCII_REAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_integer(
    text: str,
    *,
    field: str | None = None,
    file: str | None = None,
    line: int | None = None,
    bounds: tuple[int, int] = INT64_RANGE,
) -> int:
    """A whole number written in ASCII digits within `bounds` (a column's range: column_range),
    else an InputError naming the field."""
    if not _ASCII_INTEGER.fullmatch(text):
        raise InputError(f"{text!r} is not an integer", file=file, line=line, field=field)
    low, high = bounds
    if len(text.lstrip("+-")) > _MAX_INTEGER_DIGITS:
        raise InputError(f"{text} is out of range {low}..{high}", file=file, line=line, field=field)
    value = int(text)
    if not low <= value <= high:
        raise InputError(f"{value} is out of range {low}..{high}", file=file, line=line, field=field)
    return value


def parse_real(text: str, *, field: str | None = None, file: str | None = None, line: int | None = None) -> float:
    """A finite number written in ASCII (digits, point, exponent), else an InputError."""
    if not _ASCII_REAL.fullmatch(text):
        problem = "not a finite number" if text.strip("+-").lower() in ("nan", "inf", "infinity") else "not a number"
        raise InputError(f"{text!r} is {problem}", file=file, line=line, field=field)
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"{text!r} is not a finite number", file=file, line=line, field=field)
    return value


def ascii_int(text: str) -> int:
    """argparse's `type` for integer options: ASCII digits only (argparse says "invalid int value")."""
    if not _ASCII_INTEGER.fullmatch(text):
        raise ValueError(text)
    return int(text)


def ascii_float(text: str) -> float:
    """argparse's `type` for real options: ASCII only (argparse says "invalid float value")."""
    if not _ASCII_REAL.fullmatch(text):
        raise ValueError(text)
    return float(text)


ascii_int.__name__, ascii_float.__name__ = "int", "float"  # how argparse names them in its errors


def is_digits(text: str) -> bool:
    """Whether `text` is ASCII digits only. str.isdigit() alone also says yes to other scripts'
    digits ('٣', which int() reads as 3) and to superscripts ('²', which int() refuses with a
    ValueError), so a check by isdigit() before int() is either too lenient or a traceback."""
    return text.isascii() and text.isdigit()


def parse_id(text: str) -> int | None:
    """A row id given as text (a query parameter): ASCII digits within 64 bits, else None."""
    if not is_digits(text) or len(text) > _MAX_INTEGER_DIGITS:
        return None
    value = int(text)
    return value if value <= INT64_RANGE[1] else None


def column_range(model: type[models.Model], field_name: str) -> tuple[int, int]:
    """The values an integer column holds on every supported database (Django's portable
    ranges: SQLite alone would take any 64-bit value)."""
    internal_type = model._meta.get_field(field_name).get_internal_type()
    return BaseDatabaseOperations.integer_field_ranges.get(internal_type, INT64_RANGE)
