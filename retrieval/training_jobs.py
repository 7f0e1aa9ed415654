"""Queueing a training: training pairs as data, the checks that refuse a training before
anything loads, and the "train" job on the gpu queue. Apart from retrieval.training, which loads
torch and sentence-transformers (seconds; tens of seconds on a busy machine): the web process
that only queues a training imports this module, so the form answers at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from celery import signature
from django.db import transaction

from jobs.models import Job
from jobs.services import create_job, dispatch

from .errors import InputError
from .models import Collection, Query, Retriever
from .selectors import registered_dense_retriever

TRAIN_SPLITS = ("train",)
# By name: retrieval.tasks is what a worker imports, not the web process.
TRAINING_TASK = "retrieval.tasks.train_retriever"


@dataclass(frozen=True)
class TrainingPair:
    """One training example: a query, its positive passage, optional hard negatives, and the
    group (book) whose pairs may share a batch."""

    query_text: str
    positive_text: str
    hard_negatives: tuple[str, ...] = ()
    group: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> TrainingPair:
        return cls(
            data["query_text"], data["positive_text"], tuple(data.get("hard_negatives", ())), data.get("group", "")
        )


def pairs_to_json(pairs: Sequence[TrainingPair] | None) -> list[dict] | None:
    """Pairs as Celery's JSON serializer can carry them."""
    return None if pairs is None else [dataclasses.asdict(pair) for pair in pairs]


def pairs_from_json(rows: Sequence[dict] | None) -> list[TrainingPair] | None:
    return None if rows is None else [TrainingPair.from_dict(row) for row in rows]


def pair_group(query: Query) -> str:
    """Pairs of one group may share a batch: the query's book, else its whole collection (BEIR)."""
    return f"document-{query.document_id}" if query.document_id else f"collection-{query.collection_id}"


def no_training_pairs(collection: Collection, field: str) -> InputError:
    return InputError(
        f"no training pairs: collection {collection.name!r} needs queries in split 'train' with relevant "
        "passages, at least two per book",
        field=field,
    )


def has_training_queries(collection: Collection) -> bool:
    """Whether the collection has any query to train on: what a queued training would find out
    only on its worker, after loading the model."""
    return Query.objects.filter(collection=collection, split__in=TRAIN_SPLITS, qrels__relevance__gt=0).exists()


def resolve_base_model(model: str) -> str | None:
    """The model a training starts from, named as forms and the API name it: empty for the
    default model; a registered dense retriever (name or id) to continue training it; anything
    else is a model name or folder, which the worker loads (or names as missing)."""
    if not model:
        return None
    retriever = registered_dense_retriever(model)
    if retriever is None:
        return model
    if retriever.query_model_path:
        raise InputError(
            f"retriever {retriever.name!r} has separate query and passage encoders; a training starts both "
            "from one model, so it cannot continue this one",
            field="base_model",
        )
    return retriever.model_path or None


# Each setting's rule: (the field a refusal names, the test, the refusal). A setting left out is
# train_retriever's default, which passes.
RULES = {
    "batch_size": ("batch_size", lambda value: value >= 2, "must be at least 2 (in-batch negatives), got {}"),
    "learning_rate": ("learning_rate", lambda value: value > 0, "must be positive, got {}"),
    "epochs": ("epochs", lambda value: value >= 1, "must be at least 1, got {}"),
    "patience": ("patience", lambda value: value >= 1, "must be at least 1, got {}"),
    "max_steps": ("max_steps", lambda value: value is None or value >= 1, "must be at least 1, got {}"),
    "context_left": ("context", lambda value: value >= 0, "context sizes cannot be negative"),
    "context_right": ("context", lambda value: value >= 0, "context sizes cannot be negative"),
}


def check_training_parameters(*, name: str, **settings) -> None:
    """Refuse bad settings before a model is loaded or a job queued (settings not named here are
    not checked: a model or a seed is the worker's to find missing)."""
    if not name or not name.strip():
        raise InputError("a trained retriever needs a name", field="name")
    if Retriever.objects.filter(name=name).exists():
        raise InputError(f"a retriever named {name!r} already exists", field="name")
    for key, value in settings.items():
        if key in RULES:
            field, passes, refusal = RULES[key]
            if not passes(value):
                raise InputError(refusal.format(value), field=field)


def queue_training(collection: Collection, user, params: dict, *, described: dict, task: str, arguments: list) -> Job:
    """The checks and the job every training goes through, from a collection or from a study:
    bad settings and a name already being trained are refused here, before anything is queued;
    `task(job id, *arguments)` runs on the gpu queue."""
    check_training_parameters(**params)
    queued = Job.objects.filter(
        kind="train", status__in=[Job.Status.PENDING, Job.Status.RUNNING], parameters__name=params["name"]
    ).first()
    if queued:  # both would train to the end, and the second then fail to register its name
        raise InputError(
            f"a training of a retriever named {params['name']!r} is already queued (job {queued.pk})", field="name"
        )
    with transaction.atomic():
        job = create_job("train", "gpu", {"collection": collection.name, **params, **described}, user=user)
        dispatch(job, signature(task), *arguments)
    return job


def start_training_async(collection: Collection, user=None, **params) -> Job:
    """Queue a training on the collection's "train" queries on the "gpu" queue; the Job records
    progress, result and any error. A collection with no training query is refused here."""
    if not has_training_queries(collection):
        raise no_training_pairs(collection, "collection")
    return queue_training(
        collection, user, params, described={}, task=TRAINING_TASK, arguments=[collection.pk, params, None, None]
    )
