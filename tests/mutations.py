"""Mutated copies of valid input files for the importers' property-based tests, and the property
they must all satisfy: a clean refusal (one line, no traceback, nothing written) or success."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable

from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Bounded so the fuzzers stay in the suite: each importer gets this many mutated files per run.
FUZZ_SETTINGS = settings(
    max_examples=int(os.environ.get("MARGINALIA_FUZZ_EXAMPLES", "40")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

INSERTIONS = [
    b"[" * 100_000 + b"]" * 100_000,
    b"{" * 40 + b"}" * 40,
    b'"\\ud800"',
    b"\\udc00",
    b"\\u0000",
    b"\x00",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\n",
    b'"',
    b"NaN",
    b"1e400",
]
HUGE_NUMBERS = [str(2**63).encode(), b"9" * 400, b"-" + str(2**63 + 1).encode(), b"1e400", b"9" * 5000]
_NUMBER = re.compile(rb"\d+")


@st.composite
def mutated(draw, valid: bytes) -> bytes:
    """`valid` with one mutation: bytes flipped, truncated, something inserted (deep nesting,
    surrogate or NUL escapes, raw NUL, BOM, a quote, NaN), or a number made huge."""
    numbers = list(_NUMBER.finditer(valid))
    kinds = ["flip", "truncate", "insert"] + (["number"] if numbers else [])
    kind = draw(st.sampled_from(kinds))
    data = bytearray(valid)
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, len(data) - 1))])
    if kind == "insert":
        at = draw(st.integers(0, len(data)))
        return bytes(data[:at] + draw(st.sampled_from(INSERTIONS)) + data[at:])
    number = draw(st.sampled_from(numbers))
    return valid[: number.start()] + draw(st.sampled_from(HUGE_NUMBERS)) + valid[number.end() :]


def assert_clean_outcome(command: str, args: list, row_counts: Callable[[], dict]) -> str | None:
    """Run the command in a savepoint that is rolled back afterwards (examples stay independent):
    it must succeed, or refuse with one line and leave `row_counts()` as it was. Any other
    exception (a traceback) fails the test. Returns the refusal, if any."""
    with transaction.atomic():
        before = row_counts()
        try:
            call_command(command, *map(str, args), stdout=io.StringIO())
        except CommandError as refusal:
            message = str(refusal)
            assert message and "\n" not in message and "Traceback" not in message, message
            assert row_counts() == before, message
            return message
        finally:
            transaction.set_rollback(True)
    return None
