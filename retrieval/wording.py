"""Numbers in sentences, worded right for every app's messages and summaries: "1 candidate",
"2 candidates", "1 query skipped", "3 cache entries". Lives in retrieval, the lowest app with
words to say, so annotation, evaluation and console share it."""

from __future__ import annotations

VOWELS = "aeiou"
IRREGULAR_PLURALS = {"is": "are", "was": "were", "has": "have", "this": "these"}


def plural(noun: str, count: int) -> str:
    """`noun` (its last word) as `count` needs it: English's regular plurals (query → queries,
    box → boxes, run → runs) and a few irregular words."""
    if count == 1:
        return noun
    head, _, word = noun.rpartition(" ")
    if word in IRREGULAR_PLURALS:
        word = IRREGULAR_PLURALS[word]
    elif word.endswith("y") and len(word) > 1 and word[-2] not in VOWELS:
        word = word[:-1] + "ies"
    elif word.endswith(("s", "x", "ch", "sh")):
        word += "es"
    else:
        word += "s"
    return f"{head} {word}" if head else word


def counted(count: int, noun: str) -> str:
    """ "1 query", "0 queries", "12 candidates"."""
    return f"{count} {plural(noun, count)}"
