"""What is read back about judges: the study's judge results and the answer export. Staff-only:
nothing here is ever reached from an annotator's page or API."""

from __future__ import annotations

from annotation.models import Study

from .models import Judge
from .services import current_answers, judge_tally, study_judges


def study_judge_results(study: Study) -> list[dict]:
    """One tally per judge version that answered the study, by judge name."""
    return [judge_tally(study, judge) for judge in study_judges(study)]


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
