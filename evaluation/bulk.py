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
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


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
