"""The one error type for bad input: it names the file, the line and the field, so a researcher
can fix the data without reading a traceback. The command line and the API print it as
`file:line: field 'name': message`; pages say the same in words (`for_people`)."""

from __future__ import annotations

from collections.abc import Mapping


class InputError(Exception):
    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, field: str | None = None):
        self.message, self.file, self.line, self.field = message, file, line, field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ":".join(str(part) for part in (self.file, self.line) if part is not None)
        field = f"field '{self.field}': " if self.field else ""
        return f"{where + ': ' if where else ''}{field}{self.message}"

    def for_people(self, labels: Mapping[str, str] | None = None) -> str:
        """The error as a page shows it: "Line 3 of corpus.jsonl: Candidates must be between 2
        and 20, not 25." The field is named by its label on the form (`labels`, else the field's
        name in words), a number it refused is "not N" rather than "got N", and the sentence
        starts with a capital and ends with a full stop."""
        where = ""
        if self.file is not None:
            where = f"Line {self.line} of {self.file}: " if self.line is not None else f"In {self.file}: "
        message = self.message.replace(", got ", ", not ")
        if self.field:
            # A file's fields are the data's own keys, kept verbatim; a form's are named in words.
            label = (labels or {}).get(self.field) or (
                f"“{self.field}”" if self.file is not None else self.field.replace("_", " ").capitalize()
            )
            joiner = " " if message.startswith(("must ", "is ", "has ", "needs ")) else ": "
            message = f"{label}{joiner}{message}"
        sentence = f"{where}{message}"
        sentence = sentence[:1].upper() + sentence[1:]
        return sentence if sentence.endswith((".", "!", "?")) else f"{sentence}."
