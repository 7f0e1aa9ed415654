"""Training a dense retriever on a study's human judgments, the same way from the
`train_from_study` command, the study page and the API: the study's pairs (see
annotation.training_pairs), queries read with the study's context sizes (as annotators saw them),
and a seeded share of the items held out for early stopping. The training itself is retrieval's.

Torch loads inside the functions only, so the web process imports this module for free."""

from __future__ import annotations

from annotation.models import Study
from jobs.models import Job
from retrieval.errors import InputError

DEFAULT_VALIDATION_SHARE = 0.1


def study_training_arguments(study: Study, *, validation_share: float, seed: int, **params) -> dict:
    """train_retriever's keywords for training on `study`'s judgments: `params` (its other
    settings) with the study's context sizes, the seed, and the pairs split into training and
    validation."""
    from annotation.training_pairs import study_training_pairs
    from retrieval.dense import default_model, mask_token_of
    from retrieval.training import split_validation

    if not 0 <= validation_share < 1:
        raise InputError(f"must be in [0, 1), got {validation_share}", field="validation_share")
    pairs = study_training_pairs(study, mask_token_of(params.get("base_model") or default_model()))
    pairs, validation_pairs = split_validation(pairs, validation_share, seed)
    return {
        **params,
        "seed": seed,
        "context_left": study.context_left,
        "context_right": study.context_right,
        "pairs": pairs,
        "validation_pairs": validation_pairs,
    }


def start_study_training(
    study: Study, user=None, *, validation_share: float = DEFAULT_VALIDATION_SHARE, seed: int, **params
) -> Job:
    """Queue a training on the study's judgments on the "gpu" queue; returns its Job."""
    from retrieval.training import start_training_async

    return start_training_async(
        study.collection,
        user,
        **study_training_arguments(study, validation_share=validation_share, seed=seed, **params),
    )
