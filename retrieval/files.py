"""Writing files that readers see whole or not at all (the embedding cache's segments, exported
qrels): a hidden temporary sibling, flushed to disk, then renamed into place with `os.replace`."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def write_atomically(path: Path, write: Callable[[IO], None], *, binary: bool = False) -> None:
    """Create `path` (and its folder) with `write(file)`; a failure leaves neither the file nor
    the temporary one. Text is UTF-8."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") if binary else os.fdopen(handle, "w", encoding="utf-8") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
