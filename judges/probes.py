"""The position probe: a k-way (proxy) item asked again with its candidates in another order.

The other order is the shown order turned by one place (the candidate shown first is listed
last, every other one moves up): every candidate changes place, so a judge that answers by
what it reads chooses the same candidate both times, and one that answers by place chooses the
same place (another candidate). The original prompt is the one judge_study asks (its answer is
shared with it); the turned prompt's answer is an item answer under its own prompt hash, so no
report that reads the current prompts counts it. Sample 0 only.
"""

from __future__ import annotations

from dataclasses import dataclass

from annotation.models import Item, ItemCandidate, Study
from jobs.progress import Progress, no_progress
from retrieval.errors import InputError

from .asking import Question, ask
from .models import Judge, JudgeAnswer
from .prompts import item_prompt
from .services import PROMPTED, judge_prompt, judged_items


@dataclass(frozen=True)
class ProbedItem:
    item: int
    candidates: int
    first: int | None  # display position chosen in the shown order (None: unreadable)
    turned: int | None  # display position chosen in the turned order
    first_place: int | None  # 1-based place in its list of the candidate chosen, shown order
    turned_place: int | None  # ... turned order


def turned_order(positions: list[int]) -> list[int]:
    return positions[1:] + positions[:1]


def position_probe(judge: Judge, study: Study, progress: Progress = no_progress) -> list[ProbedItem]:
    """Ask what is not stored yet of the study's work items in both orders; each item's two
    answers."""
    if study.kind != Study.Kind.PROXY:
        raise InputError(
            f"study {study.pk} is a {study.kind} study; the position probe needs k-way (proxy) items",
            field="probe_study",
        )
    if judge.backend not in PROMPTED:
        raise InputError(f"judge {judge} is a {judge.backend} judge: it answers no prompts to probe", field="judge")
    items = judged_items(study)
    orders: dict[int, list[int]] = {item.pk: [] for item in items}
    for item_id, position in (
        ItemCandidate.objects.filter(item__study=study, item__role=Item.Role.WORK)  # judged_items' items
        .order_by("item_id", "position")
        .values_list("item_id", "position")
    ):
        orders[item_id].append(position)
    prompts = {
        item.pk: (
            judge_prompt(item, judge),
            item_prompt(item, judge.settings.get("prompt", ""), turned_order(orders[item.pk])),
        )
        for item in items
    }
    stored = {
        (item_id, prompt_hash): parsed
        for item_id, prompt_hash, parsed in JudgeAnswer.objects.filter(
            judge=judge, item__in=items, sample=0
        ).values_list("item_id", "prompt_hash", "parsed")
    }
    pending = [
        Question(prompt, 0, {"item": item})
        for item in items
        for prompt in prompts[item.pk]
        if (item.pk, prompt.hash) not in stored
    ]
    for answer in ask(judge, pending, progress):
        stored[(answer.item_id, answer.prompt_hash)] = answer.parsed
    probed = []
    for item in items:
        first, turned = ((stored.get((item.pk, prompt.hash)) or {}).get("position") for prompt in prompts[item.pk])
        shown, moved = orders[item.pk], turned_order(orders[item.pk])
        probed.append(
            ProbedItem(
                item.pk,
                len(shown),
                first,
                turned,
                shown.index(first) + 1 if first is not None else None,
                moved.index(turned) + 1 if turned is not None else None,
            )
        )
    return probed
