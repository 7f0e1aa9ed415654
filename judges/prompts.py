"""Prompts: what a judge is asked, built from exactly what an annotator is shown.

The payload comes from `annotation.selectors.shown_item`, the builder behind the annotator page
and API, so no gold flag, provenance or external id can reach a judge unless it reaches an
annotator too. The wording lives in plain-text templates a researcher can read and change
(`judges/prompts/{proxy,relevance,quotability,preference}.txt`, or MARGINALIA_JUDGE_PROMPTS_DIR),
with `$guidelines`, `$question`, `$scale`, `$query`, `$candidates`, `$count`, `$passage`, `$title`
and (preference) `$answers` filled in. A prompt's hash covers the messages as sent, so editing a template asks again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from string import Template

from django.conf import settings

from annotation.models import Item, Study
from annotation.selectors import shown_item
from retrieval.errors import InputError

MASK = "[masked sentence(s)]"
NO_GUIDELINES = "(none given)"
ZERO_TO_TEN = "an integer from 0 (not what the task looks for) to 10 (exactly what it looks for)"


@dataclass(frozen=True)
class Prompt:
    """The chat messages sent to a judge, and what its answer may be."""

    messages: tuple[dict, ...]
    kind: str  # proxy | relevance | quotability | preference | score
    options: tuple[int, ...]  # proxy, preference: display positions; labels: scale values; score: 0..10
    value_labels: tuple[tuple[int, str], ...] = ()
    words: tuple[str, ...] = ()  # preference: the answers besides a position ("tie", "both_bad")

    @property
    def hash(self) -> str:
        return hashlib.sha256(json.dumps(self.messages, sort_keys=True).encode()).hexdigest()

    @property
    def text(self) -> str:
        return "\n\n".join(message["content"] for message in self.messages)


def prompts_folder() -> Path:
    return Path(settings.MARGINALIA_JUDGE_PROMPTS_DIR)


def template(kind: str) -> Template:
    path = prompts_folder() / f"{kind}.txt"
    try:
        return Template(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the prompt template: {exc.strerror}", file=str(path)) from None


def _fill(kind: str, values: dict) -> str:
    try:
        return template(kind).substitute(values)
    except (KeyError, ValueError) as exc:
        raise InputError(
            f"unknown or malformed placeholder {exc}; allowed: {', '.join('$' + key for key in sorted(values))}",
            file=str(prompts_folder() / f"{kind}.txt"),
        ) from None


def shown_query(payload: dict) -> str:
    """The query as the annotator reads it: its own text, or the shown context around the mask
    (a left context only, as in quote recommendation, ends at the mask)."""
    if payload["query_text"]:
        return payload["query_text"]
    return " ".join([*payload["context_left"], MASK, *payload["context_right"]])


def _scale(values: list[dict]) -> str:
    numbers = [entry["value"] for entry in values]
    if numbers == list(range(11)) and not any(entry["label"] != str(entry["value"]) for entry in values):
        return ZERO_TO_TEN
    return ", ".join(
        f"{entry['value']} ({entry['label']})" if entry["label"] != str(entry["value"]) else str(entry["value"])
        for entry in values
    )


def _passage(candidate: dict) -> str:
    return f"{candidate['title']}\n{candidate['text']}" if candidate.get("title") else candidate["text"]


def _numbered(candidates: list[dict]) -> str:
    """The candidates as the prompt lists them: "1. text", in display order, a blank line apart."""
    return "\n\n".join(f"{number}. {_passage(candidate)}" for number, candidate in enumerate(candidates, start=1))


def item_prompt(item: Item) -> Prompt:
    """The prompt for one study item, from the annotator's payload of it."""
    payload = shown_item(item)
    guidelines = payload["guidelines"].strip() or NO_GUIDELINES
    if payload["kind"] == Study.Kind.PROXY:
        candidates = payload["candidates"]
        text = _fill(
            "proxy",
            {
                "guidelines": guidelines,
                "query": shown_query(payload),
                "candidates": _numbered(candidates),
                "count": str(len(candidates)),
            },
        )
        return Prompt(({"role": "user", "content": text},), "proxy", tuple(c["position"] for c in candidates))
    if payload["kind"] == Study.Kind.PREFERENCE:
        return _preference_prompt(payload, guidelines)
    if payload["multi_select"]:
        raise InputError(
            f"study {payload['study']} asks for several selections per item; judges answer one label per item",
            field="study",
        )
    values = payload["values"]
    text = _fill(
        payload["kind"],
        {
            "guidelines": guidelines,
            "query": shown_query(payload),
            "passage": _passage(payload["candidates"][0]),
            "question": payload["question"],
            "scale": _scale(values),
            "title": payload.get("query_title") or "(untitled)",
        },
    )
    return Prompt(
        ({"role": "user", "content": text},),
        payload["kind"],
        tuple(entry["value"] for entry in values),
        tuple((entry["value"], entry["label"]) for entry in values),
    )


def _preference_prompt(payload: dict, guidelines: str) -> Prompt:
    """A pair of candidates, numbered as shown, with the answers the study allows (a list is
    not asked: judges answer pairs)."""
    task, candidates = payload["preference"], payload["candidates"]
    if task["shape"] != "pairwise":
        raise InputError(
            f"study {payload['study']} asks to order lists; judges answer pairwise preference items", field="study"
        )
    words = tuple(word for word, allowed in (("tie", task["ties"]), ("both_bad", task["bad"])) if allowed)
    spoken = ["1 or 2 (the better passage)"]
    spoken += ["tie (equally good)"] if task["ties"] else []
    spoken += ["both bad (neither answers the query)"] if task["bad"] else []
    text = _fill(
        "preference",
        {
            "guidelines": guidelines,
            "query": shown_query(payload),
            "candidates": _numbered(candidates),
            "count": str(len(candidates)),
            "question": task["question"],
            "answers": ", ".join(spoken[:-1]) + " or " + spoken[-1] if len(spoken) > 1 else spoken[0],
        },
    )
    return Prompt(
        ({"role": "user", "content": text},), "preference", tuple(c["position"] for c in candidates), words=words
    )


def pair_prompt(query_text: str, passage_text: str, objective: str) -> Prompt:
    """BIRCO's direct-scoring prompt for a rerank: the relevance template with the task
    objective as guidelines and a 0-10 scale."""
    text = _fill(
        "relevance",
        {
            "guidelines": objective.strip() or NO_GUIDELINES,
            "query": query_text,
            "passage": passage_text,
            "question": "How well does this passage meet the task objective for this query?",
            "scale": ZERO_TO_TEN,
            "title": "(untitled)",
        },
    )
    return Prompt(({"role": "user", "content": text},), "score", tuple(range(11)))
