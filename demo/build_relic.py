"""Build the demo's RELiC-format JSON from the demo book and the scholarly contexts written for it.

    .venv/bin/python -m demo.build_relic        (from the project root; rewrites salt_ledger_relic.json)

The book is segmented with the project's own `retrieval.segmentation.split_sentences`, the same function
the importers use, so every quote's start index and length point at exactly the sentences quoted.
A quote that is not a run of whole sentences of the book is an error, not a silent skip.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

DEMO_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(DEMO_DIR.parent))

from retrieval.segmentation import split_sentences  # noqa: E402
from retrieval.text import MAX_WINDOW, strip_gutenberg  # noqa: E402

BOOK_ID = "the_salt_ledger"
BOOK_PATH = DEMO_DIR / "the_salt_ledger.txt"
CONTEXTS_PATH = DEMO_DIR / "scholarly_contexts.yaml"
OUTPUT_PATH = DEMO_DIR / "salt_ledger_relic.json"


def locate(quote_sentences: list[str], book_sentences: list[str], quote_id: str) -> int:
    """The index where the quote's sentences occur, consecutively and exactly once, in the book."""
    n = len(quote_sentences)
    starts = [i for i in range(len(book_sentences) - n + 1) if book_sentences[i : i + n] == quote_sentences]
    if len(starts) != 1:
        raise SystemExit(
            f"{CONTEXTS_PATH.name}: quote '{quote_id}' occurs {len(starts)} times as whole sentences of the book"
        )
    return starts[0]


def build(book_text: str, contexts: list[dict]) -> dict:
    sentences = split_sentences(strip_gutenberg(book_text))
    quotes = {}
    for context in contexts:
        quote_sentences = split_sentences(context["quote"])
        start = locate(quote_sentences, sentences, context["id"])
        quotes[context["id"]] = [context["left"], start, len(quote_sentences), context["right"]]
    candidates = {f"{n}_sentence": list(range(len(sentences) - n + 1)) for n in range(1, MAX_WINDOW + 1)}
    return {BOOK_ID: {"quotes": quotes, "sentences": sentences, "candidates": candidates}}


def main() -> None:
    contexts = yaml.safe_load(CONTEXTS_PATH.read_text(encoding="utf-8"))
    relic = build(BOOK_PATH.read_text(encoding="utf-8"), contexts)
    OUTPUT_PATH.write_text(json.dumps(relic, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    book = relic[BOOK_ID]
    print(f"{OUTPUT_PATH.name}: {len(book['sentences'])} sentences, {len(book['quotes'])} quotes")


if __name__ == "__main__":
    main()
