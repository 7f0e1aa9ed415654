"""A RELiC-like collection from the Gutenberg books in ../shared/data: what the sharded-run
benchmark and the sharded-run tests rank.

RELiC ranks a critic's context around a masked quotation against every window of 1-5 sentences of
the quoted book. Here each "book" is one of the Gutenberg texts (repeated under new names for more
books), split into sentences with a plain regular expression (the importer's spaCy splitter is
not what is measured); each query masks a window of 1-5 sentences (mostly 1, as in RELiC) and
takes as context 4 sentences on either side from elsewhere in the same book, so the context is
text of the book but not the quote's neighbours. Seeded: the same arguments give the same JSON.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

GUTENBERG_BOOKS = ("pride_and_prejudice", "persuasion", "heart_of_darkness")
QUOTE_LENGTHS = (1, 1, 1, 2, 3, 4, 5)  # mostly single sentences
CONTEXT = 4
MAX_LENGTH = 5


def book_sentences(gutenberg: Path, name: str) -> list[str]:
    raw = (gutenberg / f"{name}.txt").read_text(encoding="utf-8-sig")
    return [sentence.strip() for sentence in re.split(r"(?<=[.!?;:])\s+", raw) if len(sentence.strip()) > 20]


def relic_like(gutenberg: Path, *, books: int, queries_per_book: int, seed: int = 0, max_sentences: int = 0) -> dict:
    """RELiC JSON (book -> quotes, sentences, candidates) for `books` books with
    `queries_per_book` quotes each; `max_sentences` > 0 cuts each book to that many sentences."""
    rng = random.Random(seed)
    texts = {name: book_sentences(gutenberg, name) for name in GUTENBERG_BOOKS}
    relic = {}
    for number in range(books):
        source = GUTENBERG_BOOKS[number % len(GUTENBERG_BOOKS)]
        sentences = texts[source][: max_sentences or None]
        quotes = {}
        for index in range(queries_per_book):
            length = rng.choice(QUOTE_LENGTHS)
            start = rng.randrange(CONTEXT, len(sentences) - length - CONTEXT)
            elsewhere = rng.randrange(0, len(sentences) - 2 * CONTEXT)
            context = sentences[elsewhere : elsewhere + 2 * CONTEXT]
            quotes[f"{source}-{number}-q{index}"] = [context[:CONTEXT], start, length, context[CONTEXT:]]
        relic[f"{source}-{number}"] = {
            "quotes": quotes,
            "sentences": sentences,
            "candidates": {
                f"{length}_sentence": list(range(len(sentences) - length + 1)) for length in range(1, MAX_LENGTH + 1)
            },
        }
    return relic


def write_relic_like(path: Path, gutenberg: Path, **options) -> Path:
    path.write_text(json.dumps(relic_like(gutenberg, **options)), encoding="utf-8")
    return path
