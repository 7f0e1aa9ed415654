"""Numbers in sentences, worded right for every app's messages and summaries: "1 candidate",
"2 candidates", "1 query skipped", "3 cache entries". Lives in retrieval, the lowest app with
words to say, so annotation, evaluation and console share it."""

from __future__ import annotations

import re

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


# An absolute or explicitly relative file-system path (POSIX, home, Windows drive, ./ or ../), as
# opposed to a URL or a model id such as "sentence-transformers/all-MiniLM-L6-v2".
_SERVER_PATH = re.compile(r"^(/|~|[A-Za-z]:[\\/]|\.{1,2}[\\/])")


def without_server_folders(location: str, data_dir: str = "") -> str:
    """A location as a page may show it, because a page must not tell its readers how the
    server's disk is laid out: a path inside the platform's data folder (`data_dir`) relative to
    it ("models/code-words-v1/model"), any other server path by its last name only ("beir.zip");
    URLs, model ids and other names unchanged."""
    if not location or not _SERVER_PATH.match(location):
        return location
    data_dir = data_dir.rstrip("/\\")
    if data_dir and location.startswith(data_dir) and location[len(data_dir) : len(data_dir) + 1] in ("/", "\\"):
        return location[len(data_dir) + 1 :]
    parts = [part for part in re.split(r"[\\/]", location) if part]
    return parts[-1] if parts else location
