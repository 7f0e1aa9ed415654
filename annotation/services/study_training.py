"""Training a dense retriever on a study's human judgments, the same way from the
`train_from_study` command, the study page and the API: the study's pairs (see
annotation.training_pairs), queries read with the study's context sizes (as annotators saw them),
and a seeded share of the items held out for early stopping. The training itself is retrieval's.

Queueing counts the pairs (a study without any is refused at once) and the worker builds them:
their query texts need the model's mask token, and loading a model in the web request held the
browser for seconds. Torch loads inside the functions that train only, so the web process
imports this module for free."""

from __future__ import annotations

from annotation.models import Study
from annotation.training_pairs import learnable_items, no_study_pairs
from jobs.models import Job
from jobs.services import execute
from retrieval.errors import InputError
from retrieval.training_jobs import queue_training

DEFAULT_VALIDATION_SHARE = 0.1
# By name: annotation.tasks is what a worker imports.
STUDY_TRAINING_TASK = "annotation.tasks.train_on_study"


def _check_validation_share(validation_share: float) -> None:
    if not 0 <= validation_share < 1:
        raise InputError(f"must be in [0, 1), got {validation_share}", field="validation_share")


def study_training_arguments(study: Study, *, validation_share: float, seed: int, **params) -> dict:
    """train_retriever's keywords for training on `study`'s judgments: `params` (its other
    settings) with the study's context sizes, the seed, and the pairs split into training and
    validation."""
    from annotation.training_pairs import study_training_pairs
    from retrieval.dense import default_model, mask_token_of
    from retrieval.training import split_validation

    _check_validation_share(validation_share)
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
    """Queue a training on the study's judgments on the "gpu" queue; returns its Job (its
    parameters say how many pairs the judgments give)."""
    _check_validation_share(validation_share)
    pairs = len(learnable_items(study))
    if not pairs:
        raise no_study_pairs(study)
    params = {**params, "seed": seed, "context_left": study.context_left, "context_right": study.context_right}
    return queue_training(
        study.collection,
        user,
        params,
        described={"pairs": pairs, "study": study.pk},
        task=STUDY_TRAINING_TASK,
        arguments=[study.pk, params, validation_share],
    )


def run_study_training(job_id: int, study_id: int, params: dict, validation_share: float) -> dict:
    """The worker's part: build the pairs (the model's tokenizer gives the mask token) and train
    as job `job_id`."""
    from retrieval.training import train_retriever

    study = Study.objects.select_related("collection").get(pk=study_id)
    return execute(
        job_id,
        lambda progress: train_retriever(
            study.collection,
            **study_training_arguments(study, validation_share=validation_share, **params),
            job_id=job_id,
            progress=progress,
        ),
    )
