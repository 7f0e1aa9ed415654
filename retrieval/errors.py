"""The one error type for bad input: it names the file, the line and the field, so a researcher
can fix the data without reading a traceback."""

from __future__ import annotations


class InputError(Exception):
    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, field: str | None = None):
        self.message, self.file, self.line, self.field = message, file, line, field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ":".join(str(part) for part in (self.file, self.line) if part is not None)
        field = f"field '{self.field}': " if self.field else ""
        return f"{where + ': ' if where else ''}{field}{self.message}"
