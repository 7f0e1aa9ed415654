"""What is read back about judges: the study's judge results and the answer export. Staff-only:
nothing here is ever reached from an annotator's page or API."""

from __future__ import annotations

import hashlib

from django.db.models import Count, Max

from annotation.models import Item, Judgment, Study
from annotation.post_editing import CONDITION_KEY
from jobs.models import Job
from jobs.services import ACTIVE

from .models import Judge, JudgeAnswer, JudgeCard, JudgeSecret
from .prompts import prompts_folder
from .services import current_answers, judge_tally, study_judges


def judge_secret_row(secret: JudgeSecret) -> dict:
    """What is shown of a judge secret: its name, a hint of its value and the judges naming it."""
    return {
        "id": secret.pk,
        "name": secret.name,
        "hint": secret.hint,
        "judges": sorted(
            set(Judge.objects.filter(settings__api_key_secret=secret.name).values_list("name", flat=True))
        ),
        "created_by": secret.created_by.username if secret.created_by else None,
        "created_at": secret.created_at,
        "updated_at": secret.updated_at,
    }


def judging_jobs(study: Study) -> list[Job]:
    """The study's judging jobs still pending or running, oldest first: what the panel follows."""
    return list(Job.objects.filter(kind="judge", parameters__study=study.pk, status__in=ACTIVE).order_by("pk"))


def study_judge_results(study: Study) -> list[dict]:
    """One tally per judge version that answered the study, by judge name, with the version's id
    (its staff page and /api/judges/ID/cards/)."""
    return [{**judge_tally(study, judge), "judge_id": judge.pk} for judge in study_judges(study)]


def judge_answer_rows(study: Study, judge: Judge | None = None) -> list[dict]:
    """One row per stored answer (current prompts only), kept apart from the judgments export:
    the judge, the item and query, the sample, what it said and what that was read as."""
    rows = []
    for version in [judge] if judge else study_judges(study):
        answers = (
            current_answers(study, version).select_related("item__query").prefetch_related("item__candidates__passage")
        )
        for answer in answers.order_by("item__position", "sample"):
            candidates = {c.position: c.passage.external_id for c in answer.item.candidates.all()}
            parsed = answer.parsed or {}
            rows.append(
                {
                    "judge": version.name,
                    "version": version.version,
                    "backend": version.backend,
                    "study": study.pk,
                    "item": answer.item_id,
                    "query": answer.item.query.external_id,
                    "sample": answer.sample,
                    "position": parsed.get("position"),
                    "choice": candidates.get(parsed["position"]) if "position" in parsed else None,
                    "label": parsed.get("label"),
                    "score": parsed.get("score"),
                    "failure_reason": answer.failure_reason,
                    "raw_response": answer.raw_response,
                    "prompt_hash": answer.prompt_hash,
                    "prompt_tokens": answer.prompt_tokens,
                    "completion_tokens": answer.completion_tokens,
                    "seconds": answer.seconds,
                }
            )
    return rows


def study_judge_answers(study: Study) -> dict[Judge, dict[int, list[dict | None]]]:
    """judge (the latest version of each name that answered the study) -> item id -> parsed
    answer per sample (None where the answer could not be read), current prompts only: what the
    report compares with the humans."""
    latest: dict[str, Judge] = {}
    for judge in study_judges(study):
        latest.setdefault(judge.name, judge)
    table = {}
    for judge in latest.values():
        answers: dict[int, dict[int, dict | None]] = {}
        for item_id, sample, parsed in current_answers(study, judge).values_list("item_id", "sample", "parsed"):
            answers.setdefault(item_id, {})[sample] = parsed
        table[judge] = {item_id: [by_sample[s] for s in sorted(by_sample)] for item_id, by_sample in answers.items()}
    return table


def judge_answers_fingerprint(study: Study) -> dict:
    """What a report's judge sections depend on: the study's stored answers and the prompt
    templates (an edited template makes older answers stale)."""
    answers = JudgeAnswer.objects.filter(item__study=study).aggregate(count=Count("id"), last=Max("id"))
    templates = hashlib.sha256(
        b"".join(path.read_bytes() for path in sorted(prompts_folder().glob("*.txt")))
    ).hexdigest()
    return {**answers, "templates": templates}


def judge_labels(study: Study, judge: Judge) -> dict[int, list[int]]:
    """item id -> the labels the judge gave it, one per readable sample in sample order."""
    labels: dict[int, list[int]] = {}
    for item_id, parsed in current_answers(study, judge).order_by("item_id", "sample").values_list("item_id", "parsed"):
        if parsed and parsed.get("label") is not None:
            labels.setdefault(item_id, []).append(parsed["label"])
    return labels


def card_summary(card: JudgeCard) -> dict:
    """A card's headline figures (evaluation.judge_card's payload), for the table that compares
    the cards of a judge's versions and prompts: kappa with the humans, the first metric's
    leaderboard agreement, how often it follows the position, its length slope minus the
    humans', calibration error, self-consistency and the unparseable share; `sampled_from`: the
    pool the pairs were sampled from (judge_card --sample), else None."""
    payload = card.payload
    leaderboard = payload.get("leaderboard") or {}
    metric, section = next(iter((leaderboard.get("metrics") or {}).items()), (None, {}))
    return {
        "card": card.pk,
        "judge": card.judge.name,
        "version": card.judge.version,
        "backend": card.judge.backend,
        "collection": payload.get("collection"),
        "human": card.human,
        "created_at": card.created_at,
        "prompt": card.prompt.get("name"),
        "prompt_sha256": card.prompt.get("sha256"),
        "pairs": (payload.get("pool") or {}).get("pairs"),
        "samples": (payload.get("pool") or {}).get("samples"),
        "sampled_from": ((payload.get("pool") or {}).get("sample") or {}).get("of"),
        "kappa": (payload.get("items") or {}).get("kappa"),
        "metric": metric,
        "kendall_tau": section.get("kendall_tau"),
        "tau_ap": section.get("tau_ap"),
        "follows_position": (payload.get("position") or {}).get("follows_position"),
        "length_difference": (payload.get("length") or {}).get("difference"),
        "ece": (payload.get("calibration") or {}).get("ece"),
        "all_agree": (payload.get("self_consistency") or {}).get("all_agree"),
        "unparseable": (payload.get("unparseable") or {}).get("share"),
    }


def judge_cards(name: str) -> list[dict]:
    """The cards of every version of the judge `name`, newest first: each card's summary, its
    prompt (template text and hash) and its whole payload."""
    cards = JudgeCard.objects.filter(judge__name=name).select_related("judge")
    return [{**card_summary(card), "prompt_record": card.prompt, "payload": card.payload} for card in cards]


def post_editing_state(study: Study) -> dict:
    """Staff's view of a study's post-editing condition: who proposed (judge, version), the
    share and seed, how many items show a proposal, and how many judgments were given with one
    and kept it."""
    condition = (study.parameters or {}).get(CONDITION_KEY)
    judgments = Judgment.objects.filter(item__study=study, voided=False)
    return {
        "study": study.pk,
        "condition": condition,
        "items_with_proposal": Item.objects.filter(study=study, proposal__isnull=False).count(),
        "judgments": judgments.count(),
        "judgments_with_proposal": judgments.filter(proposal_shown=True).count(),
        "kept": judgments.filter(proposal_kept=True).count(),
    }
