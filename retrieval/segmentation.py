"""RELiC's sentence segmentation.

RELiC segments books with spaCy and adds ellipses, colons and semicolons as sentence boundaries,
because scholars often quote only part of a sentence. We reproduce that with spaCy's rule-based
`sentencizer` on a blank English pipeline, so no model has to be downloaded, plus one repair: an
opening quotation mark after a boundary starts the next sentence instead of ending the last one.

A module of its own because spaCy takes seconds of CPU to import (thinc imports torch): only the
code that segments plain text imports it (retrieval.text has the rest of book text handling).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import spacy
from spacy.attrs import ORTH
from spacy.language import Language
from spacy.pipeline.sentencizer import Sentencizer
from spacy.strings import get_string_id
from spacy.tokens import Doc

from .text import paragraphs

# Runs of characters without a space longer than this are tokenised in RUN_PIECE pieces.
LONG_RUN = 1000
RUN_PIECE = 64

# spaCy's English tokenizer keeps "...", "...." and "…" as single tokens; the sentencizer matches
# whole token texts, so each spelling must be listed.
EXTRA_BOUNDARIES = ("...", "....", "…", ":", ";")

_OPENERS = frozenset({'"', "'", "“", "‘", "«", "(", "["})
_OPENER_IDS = np.array([get_string_id(text) for text in _OPENERS], dtype=np.uint64)  # spaCy's ORTH values


@Language.component("opening_quote_boundaries")
def opening_quote_boundaries(doc: Doc) -> Doc:
    """The sentencizer keeps every punctuation token after a boundary in the sentence before it:
    right for a closing quote (`"Stop!" he said`), wrong for an opening one (`Why? "Because."`).
    An opener set off by a space before and glued to a sentence start after moves to that
    sentence. Only the openers are visited (found among the token ids by numpy): a Python step
    per token was a third of segmentation's time."""
    openers = np.flatnonzero(np.isin(doc.to_array(ORTH)[1:-1], _OPENER_IDS)) + 1
    for index in openers.tolist():
        token, following = doc[index], doc[index + 1]
        opens_following_word = bool(doc[index - 1].whitespace_) and not token.whitespace_
        if opens_following_word and following.is_sent_start:
            token.is_sent_start = True
            following.is_sent_start = False
    return doc


@lru_cache(maxsize=1)
def sentence_pipeline() -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer", config={"punct_chars": [*Sentencizer.default_punct_chars, *EXTRA_BOUNDARIES]})
    nlp.add_pipe("opening_quote_boundaries")
    return nlp


# A paragraph longer than spaCy's max_length is tokenised in pieces of about this many characters.
PIECE_CHARS = 100_000


def _tokenised(nlp: Language, paragraph: str) -> Doc:
    """The paragraph as spaCy tokens. Tokenised in pieces cut at spaces, put together as one Doc,
    when it is longer than spaCy's max_length (1,000,000 characters; two Austen novels whose
    paragraphs end in single newlines are one paragraph of 1.3 million) or has a run without
    spaces longer than LONG_RUN characters (the tokenizer takes time quadratic in such a run: it
    peels prefixes one by one off the rest, and 100,000 "[" would take hours; such a run goes in
    pieces of RUN_PIECE). spaCy splits at spaces before anything else, so every piece gives the
    tokens the whole would, and the sentencizer then sees the paragraph whole: ordinary text is
    tokenised and segmented exactly as before."""
    runs = paragraph.split(" ")
    if len(paragraph) <= nlp.max_length and max(map(len, runs)) <= LONG_RUN:
        return nlp.make_doc(paragraph)
    words: list[str] = []
    spaces: list[bool] = []
    for piece, space_after in _pieces(runs):
        tokens = nlp.tokenizer(piece)
        words += [token.text for token in tokens]
        spaces += [bool(token.whitespace_) for token in tokens]
        spaces[-1] = space_after
    return Doc(nlp.vocab, words=words, spaces=spaces)


def _pieces(runs: list[str]):
    """(text, followed by a space) for consecutive runs joined up to PIECE_CHARS characters, and
    for each run longer than LONG_RUN its RUN_PIECE slices (only the last followed by a space)."""
    batch: list[str] = []
    size = 0
    for index, run in enumerate(runs):
        last = index == len(runs) - 1
        if len(run) > LONG_RUN:
            if batch:
                yield " ".join(batch), True
                batch, size = [], 0
            slices = [run[start : start + RUN_PIECE] for start in range(0, len(run), RUN_PIECE)]
            for number, piece in enumerate(slices):
                yield piece, number == len(slices) - 1 and not last
            continue
        batch.append(run)
        size += len(run) + 1
        if size >= PIECE_CHARS:
            yield " ".join(batch), not last
            batch, size = [], 0
    if batch:
        yield " ".join(batch), False


def split_sentences(text: str) -> list[str]:
    """RELiC's sentences, in order. Paragraph by paragraph, so no sentence spans a paragraph
    break (and spaCy's max_length never applies to a whole book)."""
    nlp = sentence_pipeline()
    docs = (_tokenised(nlp, paragraph) for paragraph in paragraphs(text))
    return [
        sentence.text.strip()
        for doc in nlp.pipe(docs, batch_size=256)
        for sentence in doc.sents
        if sentence.text.strip()
    ]
