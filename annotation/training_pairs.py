"""Human judgments as training data for dense retrievers: each judged proxy item becomes a
`TrainingPair` whose positive is the gold candidate (or, without a gold, the candidate a strict
majority of annotators chose) and whose hard negatives are the shown candidates nobody chose.
Candidates some annotator picked are left out: what fooled an expert is not a safe negative."""

from __future__ import annotations

from collections import Counter

from django.db.models import Prefetch

from annotation.models import Judgment, Study
from retrieval.errors import InputError
from retrieval.scoring import query_text
from retrieval.training import TrainingPair, pair_group


def study_training_pairs(study: Study, mask_token: str | None) -> list[TrainingPair]:
    """One pair per item with a gold or majority choice; queries get the study's context sizes."""
    items = study.items.select_related("query").prefetch_related(
        "candidates__passage", Prefetch("judgments", Judgment.objects.filter(voided=False, choice__isnull=False))
    )
    pairs = []
    for item in items:
        candidates = list(item.candidates.all())
        choices = Counter(judgment.choice_id for judgment in item.judgments.all())
        judged = sum(choices.values())
        positive = next((candidate for candidate in candidates if candidate.is_gold), None) or next(
            (candidate for candidate in candidates if 2 * choices[candidate.pk] > judged), None
        )
        if positive is None:
            continue
        negatives = tuple(
            candidate.passage.retrieval_text
            for candidate in candidates
            if candidate.pk != positive.pk and not choices[candidate.pk]
        )
        pairs.append(
            TrainingPair(
                query_text(item.query, study.context_left, study.context_right, mask_token),
                positive.passage.retrieval_text,
                negatives,
                pair_group(item.query),
            )
        )
    if not pairs:
        raise InputError(
            f"study {study.pk} gives no training pairs: its items need a gold candidate or a majority choice",
            field="study",
        )
    return pairs
