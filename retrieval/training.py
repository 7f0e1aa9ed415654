"""Fine-tuning dense retrievers the way RELiC trained dense-RELiC: a contrastive loss with
in-batch negatives, where every batch holds pairs from ONE book (so the negatives are other
passages of the same book, as at retrieval time), and early stopping on validation loss.

Pairs come from a collection's queries (split "train", validation from "validation"/"dev") or
from any other source as `TrainingPair`s: the annotation app turns human judgments into pairs
(retrieval must not know studies exist). The loop is plain torch over the sentence-transformers
modules, so batching, progress, cancellation and mixed precision are ours to control.

Artifacts are written to a hidden work folder under MARGINALIA_DATA_DIR/models/ and moved into
place with one `os.replace` only when training is complete; only then is the `Retriever`
registered. A cancelled or crashed training leaves neither a model folder nor a retriever.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from django.conf import settings
from django.db.models import Prefetch
from django.utils.text import slugify

from jobs.models import Job
from jobs.progress import Progress, no_progress, throttled
from jobs.services import execute

from .dense import (
    autocast_dtype,
    default_model,
    embed_features,
    feature_builder,
    is_normalized,
    pick_device,
    read_model,
)
from .models import Collection, Qrel, Query, Retriever
from .scoring import query_text
from .training_jobs import (
    TRAIN_SPLITS,
    TrainingPair,
    check_training_parameters,
    no_training_pairs,
    pair_group,
    pairs_from_json,
)

VALIDATION_SPLITS = ("validation", "dev")
# Score multiplier for models whose embeddings are unit vectors: a cosine in [-1, 1] is too
# flat a logit for softmax (sentence-transformers' MultipleNegativesRankingLoss uses 20).
# Unnormalised models (RELiC's RoBERTa [CLS] vectors) use the raw dot product.
NORMALIZED_SCALE = 20.0
WARMUP_SHARE = 0.1
# Progress shown for the optimisation steps; saving and registering take the rest.
STEPS_SHARE = 0.98
MAX_GRAD_NORM = 1.0
PARTIAL_PREFIX = ".partial-"


def collection_pairs(
    collection: Collection, splits: Iterable[str], context_left: int, context_right: int, mask_token: str | None
) -> list[TrainingPair]:
    """A pair per (query, relevant passage) of the given splits, grouped by the query's book
    (the whole collection when queries have no book, as in BEIR)."""
    queries = (
        Query.objects.filter(collection=collection, split__in=list(splits))
        .prefetch_related(Prefetch("qrels", Qrel.objects.filter(relevance__gt=0).select_related("passage")))
        .order_by("ordinal", "pk")
    )
    return [
        TrainingPair(
            query_text(query, context_left, context_right, mask_token),
            qrel.passage.retrieval_text,
            group=pair_group(query),
        )
        for query in queries
        for qrel in query.qrels.all()
    ]


def split_validation(pairs: Sequence[TrainingPair], share: float, seed: int) -> tuple[list, list]:
    """Hold out a seeded `share` of the distinct queries (all their pairs together) for early
    stopping, when pairs come with no validation split of their own."""
    queries = sorted({pair.query_text for pair in pairs})
    random.Random(seed).shuffle(queries)
    held_out = set(queries[: int(len(queries) * share)])
    return (
        [pair for pair in pairs if pair.query_text not in held_out],
        [pair for pair in pairs if pair.query_text in held_out],
    )


class _OpenBatch:
    def __init__(self):
        self.pairs: list[TrainingPair] = []
        self.queries: set[str] = set()
        self.positives: set[str] = set()

    def accepts(self, pair: TrainingPair) -> bool:
        return pair.query_text not in self.queries and pair.positive_text not in self.positives

    def add(self, pair: TrainingPair) -> None:
        self.pairs.append(pair)
        self.queries.add(pair.query_text)
        self.positives.add(pair.positive_text)


def _pack(pairs: Sequence[TrainingPair], batch_size: int) -> list[list[TrainingPair]]:
    """Fill batches in order, sending a pair whose query or positive is already in a batch on to
    the next one: a duplicate would count a positive as its own query's negative."""
    open_batches: list[_OpenBatch] = []
    full: list[list[TrainingPair]] = []
    for pair in pairs:
        batch = next((candidate for candidate in open_batches if candidate.accepts(pair)), None)
        if batch is None:
            batch = _OpenBatch()
            open_batches.append(batch)
        batch.add(pair)
        if len(batch.pairs) == batch_size:
            open_batches.remove(batch)
            full.append(batch.pairs)
    return full + [batch.pairs for batch in open_batches]


def same_group_batches(pairs: Sequence[TrainingPair], batch_size: int, rng: random.Random) -> list[list[TrainingPair]]:
    """Batches of at most `batch_size` pairs, each from one group, in random order. A lone pair
    without hard negatives has nothing to be contrasted with, so it is left out."""
    by_group: dict[str, list[TrainingPair]] = defaultdict(list)
    for pair in pairs:
        by_group[pair.group].append(pair)
    batches = []
    for group in sorted(by_group):
        members = list(by_group[group])
        rng.shuffle(members)
        batches.extend(batch for batch in _pack(members, batch_size) if len(batch) > 1 or batch[0].hard_negatives)
    rng.shuffle(batches)
    return batches


def contrastive_loss(query_vectors: torch.Tensor, candidate_vectors: torch.Tensor, scale: float) -> torch.Tensor:
    """Mean over the batch of -log softmax(q_i . c)[i]: candidate i is query i's positive, the
    other candidates (the batch's other positives, then any hard negatives) are its negatives."""
    scores = scale * query_vectors.float() @ candidate_vectors.float().T
    return F.cross_entropy(scores, torch.arange(len(query_vectors), device=scores.device))


class _Encoders:
    """The query and passage encoders: one shared model, or two (asymmetric, as in RELiC)."""

    def __init__(self, base_model: str, device: str, asymmetric: bool):
        self.query = read_model(base_model, device)
        self.passage = read_model(base_model, device) if asymmetric else self.query
        self.asymmetric = asymmetric
        self.scale = NORMALIZED_SCALE if is_normalized(self.passage) else 1.0
        # Tokenising is most of a training step's time on a GPU: build features as encoding does.
        self.query_features = feature_builder(self.query, [])
        self.passage_features = feature_builder(self.passage, []) if asymmetric else self.query_features

    def models(self) -> list:
        return [self.query, self.passage] if self.asymmetric else [self.query]

    def parameters(self) -> list[torch.nn.Parameter]:
        return [parameter for model in self.models() for parameter in model.parameters()]

    def train(self, mode: bool) -> None:
        for model in self.models():
            model.train(mode)

    def loss(self, batch: list[TrainingPair]) -> torch.Tensor:
        positives = [pair.positive_text for pair in batch]
        taken = set(positives)
        negatives = list(
            dict.fromkeys(negative for pair in batch for negative in pair.hard_negatives if negative not in taken)
        )
        query_vectors = embed_features(self.query, self.query_features([pair.query_text for pair in batch]))
        candidate_vectors = embed_features(self.passage, self.passage_features(positives + negatives))
        return contrastive_loss(query_vectors, candidate_vectors, self.scale)

    def save(self, folder: Path) -> dict[str, Path]:
        """Write the encoders under `folder`; returns where each one went."""
        paths = (
            {"query": folder / "query", "passage": folder / "passage"}
            if self.asymmetric
            else {"passage": folder / "model"}
        )
        self.passage.save(str(paths["passage"]), create_model_card=False)
        if self.asymmetric:
            self.query.save(str(paths["query"]), create_model_card=False)
        return paths


def _validation_loss(
    encoders: _Encoders, batches: list[list[TrainingPair]], amp: torch.dtype | None, device: str
) -> float | None:
    if not batches:
        return None
    encoders.train(False)
    total = 0.0
    with torch.no_grad(), torch.autocast(device_type=device, dtype=amp, enabled=amp is not None):
        for batch in batches:
            total += encoders.loss(batch).item() * len(batch)
    return total / sum(len(batch) for batch in batches)


def _warmup_then_linear_decay(total_steps: int):
    warmup = max(1, int(total_steps * WARMUP_SHARE))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return factor


def models_folder() -> Path:
    return Path(settings.MARGINALIA_DATA_DIR) / "models"


def sweep_abandoned_work_folders() -> None:
    """Remove work folders whose training job has finished: a worker killed mid-training (no
    Python cleanup runs) leaves its folder behind, named after its job. Folders of trainings run
    without a job ("local") are left alone: nothing tells whether they are still running."""
    folder = models_folder()
    if not folder.is_dir():
        return
    for work in folder.glob(f"{PARTIAL_PREFIX}job*-*"):
        match = re.match(rf"{re.escape(PARTIAL_PREFIX)}job(\d+)-", work.name)
        if (
            match
            and not Job.objects.filter(
                pk=int(match.group(1)),
                status__in=[
                    Job.Status.PENDING,
                    Job.Status.RUNNING,
                ],
            ).exists()
        ):
            shutil.rmtree(work, ignore_errors=True)


def train_retriever(
    collection: Collection,
    *,
    name: str,
    base_model: str | None = None,
    batch_size: int = 32,
    learning_rate: float = 2e-5,
    epochs: int = 1,
    context_left: int = 4,
    context_right: int = 4,
    asymmetric: bool = False,
    patience: int = 1,
    max_steps: int | None = None,
    seed: int = 0,
    pairs: Sequence[TrainingPair] | None = None,
    validation_pairs: Sequence[TrainingPair] | None = None,
    job_id: int | None = None,
    progress: Progress = no_progress,
) -> dict:
    """Fine-tune `base_model` and register the result as a dense Retriever named `name`.

    Without `pairs`, trains on the collection's "train" queries and stops early on its
    "validation"/"dev" queries; with `pairs` (e.g. from human judgments), `collection` is only
    recorded as what the model was trained on. Returns a summary (retriever id, model path,
    steps, validation losses, throughput)."""
    check_training_parameters(
        name=name,
        batch_size=batch_size,
        learning_rate=learning_rate,
        epochs=epochs,
        patience=patience,
        max_steps=max_steps,
        context_left=context_left,
        context_right=context_right,
    )
    base_model = base_model or default_model()
    device = pick_device()
    amp = autocast_dtype(device, training=True)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    progress(0.0, "loading model")
    encoders = _Encoders(base_model, device, asymmetric)
    if pairs is None:
        mask = getattr(encoders.query.tokenizer, "mask_token", None)
        pairs = collection_pairs(collection, TRAIN_SPLITS, context_left, context_right, mask)
        validation_pairs = collection_pairs(collection, VALIDATION_SPLITS, context_left, context_right, mask)
    validation_batches = same_group_batches(validation_pairs or [], batch_size, random.Random(seed))
    steps_per_epoch = len(same_group_batches(pairs, batch_size, random.Random(seed)))
    if not steps_per_epoch:
        raise no_training_pairs(collection, "split")

    sweep_abandoned_work_folders()
    models_folder().mkdir(parents=True, exist_ok=True)
    slug = slugify(name)[:80] or "retriever"
    owner = f"job{job_id}" if job_id else "local"
    work = models_folder() / f"{PARTIAL_PREFIX}{owner}-{slug}-{uuid.uuid4().hex[:8]}"
    try:
        summary = _fit(
            encoders,
            pairs,
            validation_batches,
            work,
            rng=rng,
            steps_per_epoch=steps_per_epoch,
            batch_size=batch_size,
            learning_rate=learning_rate,
            epochs=epochs,
            patience=patience,
            max_steps=max_steps,
            amp=amp,
            device=device,
            progress=progress,
        )
        parameters = {
            "base_model": base_model,
            "batch_size": batch_size,
            "learning_rate": learning_rate,
            "epochs": epochs,
            "context_left": context_left,
            "context_right": context_right,
            "asymmetric": asymmetric,
            "patience": patience,
            "max_steps": max_steps,
            "seed": seed,
            "train_pairs": len(pairs),
            "validation_pairs": len(validation_pairs or []),
        }
        (work / "training.json").write_text(json.dumps({"parameters": parameters, **summary}, indent=2))
        progress(0.99, "saving model")  # the last point where a cancellation stops it
        final = models_folder() / f"{slug}-{uuid.uuid4().hex[:8]}"
        os.replace(work, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    try:
        retriever = Retriever.objects.create(
            name=name,
            kind=Retriever.Kind.DENSE,
            parameters={**parameters, **summary},
            model_path=str(final / ("passage" if asymmetric else "model")),
            query_model_path=str(final / "query") if asymmetric else "",
            trained_on=collection,
            training_job_id=job_id,
        )
    except BaseException:
        shutil.rmtree(final, ignore_errors=True)
        raise
    return {
        "retriever_id": retriever.pk,
        "name": retriever.name,
        "model_path": retriever.model_path,
        "query_model_path": retriever.query_model_path,
        **parameters,
        **summary,
    }


def _fit(
    encoders: _Encoders,
    pairs: Sequence[TrainingPair],
    validation_batches: list,
    work: Path,
    *,
    rng: random.Random,
    steps_per_epoch: int,
    batch_size: int,
    learning_rate: float,
    epochs: int,
    patience: int,
    max_steps: int | None,
    amp: torch.dtype | None,
    device: str,
    progress: Progress,
) -> dict:
    """The training loop. Saves the best encoders (lowest validation loss, else the last) under
    `work` and returns the figures of the training."""
    total_steps = min(steps_per_epoch * epochs, max_steps or steps_per_epoch * epochs)
    optimizer = torch.optim.AdamW(encoders.parameters(), lr=learning_rate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _warmup_then_linear_decay(total_steps))
    scaler = torch.amp.GradScaler(device, enabled=amp == torch.float16)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    report = throttled(progress)

    initial_validation_loss = _validation_loss(encoders, validation_batches, amp, device)
    best_validation_loss, stale_epochs, step, samples, train_seconds = math.inf, 0, 0, 0, 0.0
    history = []
    for epoch in range(1, epochs + 1):
        encoders.train(True)
        epoch_loss, epoch_batches = 0.0, 0
        started = time.perf_counter()
        for batch in same_group_batches(pairs, batch_size, rng):
            if step >= total_steps:
                break
            with torch.autocast(device_type=device, dtype=amp, enabled=amp is not None):
                loss = encoders.loss(batch)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(encoders.parameters(), MAX_GRAD_NORM)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            step += 1
            samples += len(batch)
            epoch_loss += loss.item()
            epoch_batches += 1
            elapsed = train_seconds + time.perf_counter() - started
            eta = elapsed / step * (total_steps - step)
            report(
                STEPS_SHARE * step / total_steps,
                f"step {step}/{total_steps} loss {epoch_loss / epoch_batches:.3f} eta {eta:.0f}s",
            )
        train_seconds += time.perf_counter() - started
        validation_loss = _validation_loss(encoders, validation_batches, amp, device)
        history.append(
            {"epoch": epoch, "train_loss": epoch_loss / max(1, epoch_batches), "validation_loss": validation_loss}
        )
        if validation_loss is not None and validation_loss < best_validation_loss:
            best_validation_loss, stale_epochs = validation_loss, 0
            encoders.save(work)
        elif validation_loss is not None:
            stale_epochs += 1
        progress(
            STEPS_SHARE * step / total_steps,
            f"epoch {epoch}/{epochs} validation loss {'n/a' if validation_loss is None else f'{validation_loss:.3f}'}",
        )
        if stale_epochs >= patience or step >= total_steps:
            break
    if not validation_batches:
        encoders.save(work)
    summary = {
        "steps": step,
        "epochs_run": len(history),
        "initial_validation_loss": initial_validation_loss,
        "best_validation_loss": None if math.isinf(best_validation_loss) else best_validation_loss,
        "history": history,
        "train_seconds": train_seconds,
        "samples_per_second": samples / train_seconds if train_seconds else None,
        "device": device,
    }
    if device.startswith("cuda"):
        summary["peak_gpu_memory_bytes"] = torch.cuda.max_memory_allocated()
    return summary


def run_training_job(
    job_id: int,
    collection_id: int,
    params: dict,
    pairs: list[dict] | None = None,
    validation_pairs: list[dict] | None = None,
) -> dict:
    """The body of the Celery task: train as job `job_id`, recording its progress and outcome."""
    collection = Collection.objects.get(pk=collection_id)
    return execute(
        job_id,
        lambda progress: train_retriever(
            collection,
            **params,
            pairs=pairs_from_json(pairs),
            validation_pairs=pairs_from_json(validation_pairs),
            job_id=job_id,
            progress=progress,
        ),
    )
