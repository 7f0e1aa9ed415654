"""Progress callbacks: how long work says how far it got.

Every long operation takes a `progress(fraction 0..1, message)` callback and never knows who
listens: a Celery task passes one that writes to its Job (jobs.services.job_progress), a
management command a terminal bar, a test or a nested step `no_progress`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

Progress = Callable[[float, str], None]


def no_progress(fraction: float, message: str = "") -> None:
    """A progress callback for callers that do not display progress."""


def throttled(progress: Progress, interval: float = 1.0) -> Progress:
    """Pass on at most one report per `interval` seconds, and always the final one: each report
    to a Job is a database write (a commit, on SQLite a disk sync)."""
    last = [float("-inf")]

    def report(fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if fraction >= 1.0 or now - last[0] >= interval:
            last[0] = now
            progress(fraction, message)

    return report


def terminal_progress(description: str, stream=None) -> Progress:
    """A tqdm bar on a terminal; silent when output is not a terminal (CI logs, pipes)."""
    from tqdm import tqdm

    stream = stream or sys.stderr
    bar = tqdm(
        total=1000,
        desc=description,
        file=stream,
        disable=not stream.isatty(),
        leave=False,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix}",
    )

    def report(fraction: float, message: str = "") -> None:
        bar.n = int(min(1.0, max(0.0, fraction)) * 1000)
        bar.set_postfix_str(message, refresh=False)
        bar.refresh()
        if fraction >= 1.0:
            bar.close()

    return report
