"""Book text without spaCy: Project Gutenberg clean-up, paragraphs and window counts.

Sentence segmentation, which needs spaCy, is retrieval.segmentation: importing spaCy costs seconds
of CPU (it imports torch through thinc), and the processes that queue imports, read qrels or
store RELiC books (whose sentences come segmented) never segment.
"""

from __future__ import annotations

import re

MAX_WINDOW = 5

_BOM = "\ufeff"
_GUTENBERG_START = re.compile(r"^\s*\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK\b.*$", re.I | re.M)
_GUTENBERG_END = re.compile(
    r"^\s*(?:\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK\b"
    r"|End of (?:the )?Project Gutenberg(?:'s)?\b).*$",
    re.I | re.M,
)
# Volunteers' credit line that Gutenberg puts right after the start marker; not part of the work.
_PRODUCER_CREDIT = re.compile(r"^\s*(?:Produced|Prepared|Transcribed) by\b[^\n]*(?:\n[^\n]+)*", re.I)
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def strip_gutenberg(text: str) -> str:
    """The work itself: without a UTF-8 BOM, and without the Project Gutenberg header, producer
    credit, footer and licence when the text has the START/END markers, with Unix line ends.
    Texts without markers come back unchanged apart from the BOM and line ends."""
    text = text.lstrip(_BOM).replace("\r\n", "\n")
    start = _GUTENBERG_START.search(text)
    if start:
        text = _PRODUCER_CREDIT.sub("", text[start.end() :].lstrip("\r\n"), count=1)
    end = _GUTENBERG_END.search(text)
    if end:
        text = text[: end.start()]
    return text


def paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs with hard-wrapped lines joined and whitespace normalised."""
    normalised = (" ".join(block.split()) for block in _PARAGRAPH_BREAK.split(text))
    return [paragraph for paragraph in normalised if paragraph]


def window_counts(n_sentences: int, max_length: int = MAX_WINDOW) -> dict[int, int]:
    """How many windows of n consecutive sentences a text of `n_sentences` sentences has, for
    n = 1..max_length: n_sentences - n + 1, never negative."""
    return {n: max(0, n_sentences - n + 1) for n in range(1, max_length + 1)}
