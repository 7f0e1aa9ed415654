"""Payloads built from a whole study or collection at once (the aggregate and soft-label routes,
the collection bundle) hold hundreds of thousands of containers while they are built and
written: a judgment's row, an item's answers, its posterior, and a list of pairs per dict the JSON
encoder writes. CPython's cyclic garbage collector walks every live container whenever those that
survived its last walks grow by a quarter of the rest, so building and encoding such a payload
walked it again and again: at 100K items the walks took 40-60% of the aggregate and soft-label
routes' time. None of these objects is part of a reference cycle; they are freed by their
reference counts with the payload. `collection_paused` turns the collector off while one is built
and written (gunicorn's and Celery's worker processes run one request or task at a time; in a
threaded server the pause holds for every thread); garbage with cycles made meanwhile is
collected by the first walk after.

They are written as JSON lines or text lines a chunk of lines at a time (`line_chunks`,
`json_lines`): a write, or a streamed chunk, per line cost a third of the encoding.
"""

from __future__ import annotations

import gc
import itertools
import json
import json.encoder
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

LINES_PER_CHUNK = 1000


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (a context manager or a decorator); one
    opened inside another, or where collection is off already, leaves it as it found it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def line_chunks(lines: Iterable[str]) -> Iterator[str]:
    """`lines`, each ended by a newline, LINES_PER_CHUNK of them joined into one string."""
    lines = iter(lines)
    while chunk := list(itertools.islice(lines, LINES_PER_CHUNK)):
        yield "\n".join(chunk) + "\n"


def json_lines(rows: Iterable[dict]) -> Iterator[str]:
    """Each row as a JSON line, json.dumps(row, ensure_ascii=False), in line_chunks."""
    return line_chunks(map(line_encoder(), rows))


def line_encoder() -> Callable[[object], str]:
    """json.dumps(value, ensure_ascii=False) for many values, with one encoder for all of them:
    json.dumps builds a JSONEncoder per call, and JSONEncoder.encode builds json's C encoder per
    call (its iterencode does), which cost 40% of encoding a bundle's 600K short records. This is
    that C encoder, built once as iterencode builds it (json.encoder.c_make_encoder; the
    JSONEncoder's own encode where the C accelerator is missing)."""
    encoder = json.JSONEncoder(ensure_ascii=False)
    if json.encoder.c_make_encoder is None:
        return encoder.encode
    markers: dict = {}  # check_circular's: what is being encoded, emptied by every call that returns
    encode = json.encoder.c_make_encoder(
        markers,
        encoder.default,
        json.encoder.encode_basestring,
        encoder.indent,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )

    def encode_line(value) -> str:
        try:
            return "".join(encode(value, 0))
        except BaseException:
            markers.clear()  # a refused value leaves its containers marked as being encoded
            raise

    return encode_line
