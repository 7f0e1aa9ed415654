"""Making a study a post-editing study: a judge's answers become the proposals annotators see
pre-selected (annotation.post_editing keeps the condition and records what each judgment did
with its proposal).

The items: a seeded share of the study's formal items (work and hidden gold alike, so that
whether an item shows a proposal never tells a gold item apart; qualification questions are a
round of their own), random.Random(seed).sample of round(share x items), in study order. The
judge is asked what it has not answered of them (sample 0, its current prompt; a run judge
answers from its scores); an item whose answer could not be read shows no proposal and is
counted as `unreadable`. Which judge proposed is kept for staff in the study's parameters and
shown to nobody else.
"""

from __future__ import annotations

import random

from annotation.models import Item, Study
from annotation.post_editing import refuse_if_answered, set_proposals
from jobs.progress import Progress, no_progress
from retrieval.errors import InputError
from retrieval.models import Run

from .asking import ask_items
from .models import Judge, JudgeAnswer
from .services import PROMPTED, judge_prompt, run_answers, store_answers


def chosen_items(study: Study, share: float, seed: int) -> list[Item]:
    if not 0 < share <= 1:
        raise InputError(f"must be more than 0 and at most 1, got {share}", field="share")
    formal = list(
        Item.objects.filter(study=study, role__in=[Item.Role.WORK, Item.Role.GOLD])
        .select_related("study", "query")
        .order_by("position")
    )
    picked = set(random.Random(seed).sample(range(len(formal)), round(share * len(formal))))
    return [item for index, item in enumerate(formal) if index in picked]


def _answers(judge: Judge, items: list[Item], progress: Progress) -> dict[int, dict | None]:
    """item id -> the judge's parsed answer (sample 0), asking what is not stored."""
    if judge.backend == Judge.Backend.RUN:
        run = Run.objects.get(pk=judge.settings["run"])
        stored = set(JudgeAnswer.objects.filter(judge=judge, item__in=items).values_list("item_id", flat=True))
        store_answers(judge, run_answers(run, [item for item in items if item.pk not in stored]))
        hashes = None
    elif judge.backend in PROMPTED:
        ask_items(judge, items, 1, progress)
        hashes = {item.pk: judge_prompt(item, judge).hash for item in items}
    else:
        raise InputError(f"judge {judge} is an {judge.backend} judge: it proposes no answers to items", field="judge")
    answers: dict[int, dict | None] = {}
    rows = JudgeAnswer.objects.filter(judge=judge, item__in=items, sample=0).values_list(
        "item_id", "prompt_hash", "parsed"
    )
    for item_id, prompt_hash, parsed in rows:
        if hashes is None or hashes[item_id] == prompt_hash:
            answers[item_id] = parsed
    return answers


def proposal_from(study: Study, parsed: dict | None) -> dict | None:
    """The proposal an answer makes: a proxy item's position, a label item's label (a run's
    score is no label: it proposes nothing there)."""
    if not parsed:
        return None
    if study.kind == Study.Kind.PROXY:
        return {"position": parsed["position"]} if "position" in parsed else None
    return {"label": parsed["label"]} if "label" in parsed else None


def enable_post_editing(
    study: Study, judge: Judge, share: float = 1.0, seed: int = 0, progress: Progress = no_progress
) -> dict:
    """Make `study` a post-editing study with `judge`'s answers as proposals on a seeded share
    of its formal items (see the module docstring); refused once anyone has answered."""
    if study.kind == Study.Kind.QUOTABILITY and study.label_schema.get("multi_select"):
        raise InputError(f"study {study.pk} asks for selections; proposals are one answer", field="study")
    items = chosen_items(study, float(share), int(seed))
    refuse_if_answered(study)
    answers = _answers(judge, items, progress)
    proposals = {item.pk: proposal for item in items if (proposal := proposal_from(study, answers.get(item.pk)))}
    condition = {"judge": judge.name, "version": judge.version, "share": float(share), "seed": int(seed)}
    shown = set_proposals(study, proposals, condition)
    return {
        "study": study.pk,
        "judge": judge.name,
        "version": judge.version,
        "share": float(share),
        "seed": int(seed),
        "selected": len(items),
        "proposals": shown,
        "unreadable": len(items) - shown,
    }
