"""Reading a judge's free-text answer: the parsed answer, or the reason it could not be read.

Models answer in many shapes ("ANSWER: 2", "Candidate 2.", "SCORE: 7/10", "Yes"); the rules,
in order: the value after an `ANSWER:` or `SCORE:` marker, else the first number in the text,
else (label scales) a value's display name standing alone in the answer. A number that is not
one of the allowed values is a failure with a reason, never a guess. Preference items also take
a word: "tie" (or "equal") and "both bad" (or "neither") after the marker, or standing alone in an
answer without a number, where the study allows them: {"label": "tie" | "both_bad"}.
"""

from __future__ import annotations

import re

from .prompts import Prompt

_MARKED = re.compile(r"(?:answer|score)\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
# A preference answer in words: tie, both bad (and the synonyms models reach for).
_WORDS = {"tie": re.compile(r"\b(?:tie|tied|equal(?:ly good)?)\b"), "both_bad": re.compile(r"\b(?:both bad|neither)\b")}
_MARKED_WORD = re.compile(r"answer\s*[:=]\s*\**\s*(tie|tied|equal|both bad|neither)\b", re.IGNORECASE)


def _number(text: str) -> str | None:
    marked = _MARKED.search(text)
    if marked:
        return marked.group(1)
    found = _NUMBER.search(text)
    return found.group(0) if found else None


def _named_value(text: str, value_labels: tuple[tuple[int, str], ...]) -> list[int]:
    """Values whose display name appears in the answer as whole words (longest names first, so
    "Not relevant" is not also read as "Relevant")."""
    remaining, found = text.lower(), []
    for value, label in sorted(value_labels, key=lambda pair: -len(pair[1])):
        pattern = re.compile(rf"\b{re.escape(label.lower())}\b")
        if pattern.search(remaining):
            found.append(value)
            remaining = pattern.sub(" ", remaining)
    return found


def parse_answer(text: str, prompt: Prompt) -> tuple[dict | None, str]:
    """(parsed answer, "") or (None, failure reason)."""
    text = (text or "").strip()
    if not text:
        return None, "empty response"
    if prompt.kind == "preference":
        marked = _MARKED_WORD.search(text)
        if marked:
            return _preference_word(marked.group(1).lower(), prompt)
    raw = _number(text)
    if raw is None:
        if prompt.kind in ("relevance", "quotability"):
            named = _named_value(text, prompt.value_labels)
            if len(named) == 1:
                return {"label": named[0]}, ""
            if len(named) > 1:
                return None, f"names several values ({', '.join(map(str, sorted(named)))})"
        if prompt.kind == "preference":
            said = [word for word, pattern in _WORDS.items() if pattern.search(text.lower())]
            if len(said) == 1:
                return _preference_word(said[0], prompt)
            if len(said) > 1:
                return None, "says both 'tie' and 'both bad'"
        return None, "no number in the response"
    if "." in raw and float(raw) != int(float(raw)):
        return None, f"{raw} is not a whole number"
    number = int(float(raw))
    if prompt.kind in ("proxy", "preference"):
        if not 1 <= number <= len(prompt.options):
            return None, f"candidate {number} is not one of 1-{len(prompt.options)}"
        return {"position": prompt.options[number - 1]}, ""
    if number not in prompt.options:
        return None, f"{number} is not on the scale ({', '.join(map(str, prompt.options))})"
    return ({"score": number} if prompt.kind == "score" else {"label": number}), ""


def _preference_word(word: str, prompt: Prompt) -> tuple[dict | None, str]:
    answer = "both_bad" if word in ("both bad", "neither", "both_bad") else "tie"
    if answer not in prompt.words:
        return None, f"'{answer.replace('_', ' ')}' is not an answer this study allows"
    return {"label": answer}, ""
