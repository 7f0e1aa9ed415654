"""A judge ensemble (backend "ensemble"): several judges asked the same prompt, their readable
answers combined into the ensemble's own answer.

- majority: the most frequent answer among the members that answered readably, a tie going to
  the lowest value (the lower label, the first candidate shown);
- mean (label and score prompts): the allowed value nearest the mean of the members' answers,
  halfway going to the lower one (export_qrels' rule for a mean of labels).
An answer no member gave readably is a failure ("no member answered readably"). The members are
the versions named when the ensemble was registered (a member's new version makes a new
ensemble version when registered again) and answer with their own settings (model, endpoint,
temperature); the prompt is the ensemble's. A member's answer to a prompt it was already asked
(the same prompt hash and sample, stored as its own answer for any item or pair) is reused, the
rest are asked of its backend; the ensemble stores its own answer, its raw response keeping
each member's text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from annotation.majority import majority_votes

from .backends import MAX_ANSWER_CHARACTERS, PROMPT_BACKENDS, Backend, Completion, Request
from .models import Judge, JudgeAnswer
from .parsing import parse_answer
from .prompts import Prompt

ANSWER_KEYS = {"proxy": "position", "score": "score"}  # else "label"


def combined(readings: Sequence[dict | None], prompt: Prompt, how: str) -> tuple[dict | None, str]:
    """(the ensemble's parsed answer, "") or (None, the reason) from its members' readings."""
    key = ANSWER_KEYS.get(prompt.kind, "label")
    values = [reading[key] for reading in readings if reading is not None]
    if not values:
        return None, "no member answered readably"
    if how == "majority":
        return {key: majority_votes([values], tie_rule="lowest")[0].label}, ""
    if key == "position":
        return None, "a mean of candidate positions means nothing: combine a proxy ensemble by majority"
    mean = sum(values) / len(values)
    return {key: min(prompt.options, key=lambda value: (abs(value - mean), value))}, ""


class EnsembleBackend(Backend):
    def __init__(self, settings: dict):
        self.how = settings["combine"]
        pinned = [member["judge"] for member in settings["members"]]
        versions = Judge.objects.in_bulk(pinned)
        self.members = [versions[pk] for pk in pinned]

    def answer_each(self, requests: Sequence[Request]) -> Iterator[tuple[int, Completion]]:
        """Every member answers the whole batch first, so the combined answers arrive together."""
        answers = [self._member_answers(member, requests) for member in self.members]
        for index, (prompt, _sample) in enumerate(requests):
            given = [member_answers[index] for member_answers in answers]
            texts = {f"{member.name} v{member.version}": answer.text for member, answer in zip(self.members, given)}
            raw = json.dumps(texts, ensure_ascii=False)
            yield (
                index,
                Completion(
                    raw[:MAX_ANSWER_CHARACTERS],
                    _total(completion.prompt_tokens for completion in given),
                    _total(completion.completion_tokens for completion in given),
                    sum(completion.seconds for completion in given),
                    combined([parse_answer(completion.text, prompt)[0] for completion in given], prompt, self.how),
                ),
            )

    def _member_answers(self, member: Judge, requests: Sequence[Request]) -> list[Completion]:
        """The member's answer to each request: stored already (same prompt hash and sample), or
        asked now."""
        stored = {
            (prompt_hash, sample): raw
            for prompt_hash, sample, raw in JudgeAnswer.objects.filter(
                judge=member, prompt_hash__in={prompt.hash for prompt, _ in requests}
            ).values_list("prompt_hash", "sample", "raw_response")
        }
        missing = [request for request in requests if (request[0].hash, request[1]) not in stored]
        asked = iter(PROMPT_BACKENDS[member.backend](member.settings).answer(missing) if missing else [])
        return [
            Completion(stored[(prompt.hash, sample)], None, None, 0.0)
            if (prompt.hash, sample) in stored
            else next(asked)
            for prompt, sample in requests
        ]


def _total(counts) -> int | None:
    counts = list(counts)
    return None if any(count is None for count in counts) else sum(counts)
