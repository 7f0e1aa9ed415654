"""Human judgments as training data for dense retrievers: each judged proxy item becomes a
`TrainingPair` whose positive is the gold candidate (or, without a gold, the candidate a strict
majority of annotators chose) and whose hard negatives are the shown candidates nobody chose.
Candidates some annotator picked are left out: what fooled an expert is not a safe negative."""

from __future__ import annotations

from collections import Counter

from django.db.models import Prefetch

from annotation.models import Item, ItemCandidate, Judgment, Study
from retrieval.errors import InputError
from retrieval.scoring import query_text
from retrieval.training_jobs import TrainingPair, pair_group


def learnable_items(study: Study) -> list[tuple[Item, ItemCandidate, list[ItemCandidate]]]:
    """(item, positive, hard negatives) for each item with a gold or a strict majority choice,
    in study order: what pairs are made of, without their texts (counting them loads no model)."""
    items = study.items.select_related("query").prefetch_related(
        "candidates__passage", Prefetch("judgments", Judgment.objects.filter(voided=False, choice__isnull=False))
    )
    learnable = []
    for item in items:
        candidates = list(item.candidates.all())
        choices = Counter(judgment.choice_id for judgment in item.judgments.all())
        judged = sum(choices.values())
        positive = next((candidate for candidate in candidates if candidate.is_gold), None) or next(
            (candidate for candidate in candidates if 2 * choices[candidate.pk] > judged), None
        )
        if positive is not None:
            negatives = [
                candidate for candidate in candidates if candidate.pk != positive.pk and not choices[candidate.pk]
            ]
            learnable.append((item, positive, negatives))
    return learnable


def no_study_pairs(study: Study) -> InputError:
    return InputError(
        f"study {study.pk} gives no training pairs: its items need a gold candidate or a majority choice",
        field="study",
    )


def study_training_pairs(study: Study, mask_token: str | None) -> list[TrainingPair]:
    """One pair per item with a gold or majority choice; queries get the study's context sizes."""
    learnable = learnable_items(study)
    if not learnable:
        raise no_study_pairs(study)
    return [
        TrainingPair(
            query_text(item.query, study.context_left, study.context_right, mask_token),
            positive.passage.retrieval_text,
            tuple(candidate.passage.retrieval_text for candidate in negatives),
            pair_group(item.query),
        )
        for item, positive, negatives in learnable
    ]
