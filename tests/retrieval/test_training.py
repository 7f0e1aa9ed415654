"""Training dense retrievers: RELiC's contrastive recipe (in-batch negatives, every batch from one
book, early stopping on validation loss), artifacts that appear only when complete, and a
registered retriever that `retrieve` can use."""

import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from retrieval import training
from retrieval.dense import DenseScorer, default_model, load_model
from retrieval.errors import InputError
from retrieval.models import Collection, Query, Retriever
from retrieval.scoring import query_text
from retrieval.training import (
    collection_pairs,
    contrastive_loss,
    same_group_batches,
    split_validation,
    train_retriever,
)
from retrieval.training_jobs import TrainingPair
from tests.factories import call_json_command, make_code_word_collection

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]

# Small, seeded and quick on two CPU cores: 8 steps per epoch over the 48 training pairs.
FAST = {"batch_size": 6, "learning_rate": 1e-4, "seed": 0}


def recall_at_1(retriever: Retriever, collection: Collection, split: str) -> float:
    """Share of the split's queries whose gold is the top-scored sentence of their book."""
    scorer = DenseScorer(retriever)
    hits = []
    for query in Query.objects.filter(collection=collection, split=split).prefetch_related("qrels"):
        passages = list(query.document.passages.order_by("start"))
        scores = scorer.score([query_text(query, 4, 4, scorer.mask_token)], passages)[0]
        hits.append(passages[int(np.argmax(scores))].pk == query.qrels.get().passage_id)
    return float(np.mean(hits))


def test_training_lowers_validation_loss_and_beats_the_zero_shot_model():
    collection = make_code_word_collection()
    zero_shot = Retriever.objects.create(name="zero-shot", kind=Retriever.Kind.DENSE, model_path=default_model())

    summary = train_retriever(collection, name="code words", epochs=2, **FAST)

    trained = Retriever.objects.get(pk=summary["retriever_id"])
    assert summary["best_validation_loss"] < summary["initial_validation_loss"]
    assert recall_at_1(trained, collection, "test") >= recall_at_1(zero_shot, collection, "test") + 0.3
    assert (trained.kind, trained.trained_on, trained.query_model_path) == ("dense", collection, "")
    assert Path(trained.model_path).is_dir()


def test_training_stops_after_patience_epochs_without_improvement_and_keeps_the_best(monkeypatch):
    collection = make_code_word_collection()
    pairs = [TrainingPair(f"code {n}", f"topic {n}", group="book") for n in range(4)]  # one batch per epoch
    # Validation loss before training, then after epochs 1, 2, 3, ...: epoch 2 is the best.
    script, evaluations, saved_after_epoch = [3.0, 1.0, 0.8, 0.9, 0.95, 0.1], [], []
    monkeypatch.setattr(
        training, "_validation_loss", lambda *args: evaluations.append(1) or script[len(evaluations) - 1]
    )
    save = training._Encoders.save
    monkeypatch.setattr(
        training._Encoders,
        "save",
        lambda self, folder: (saved_after_epoch.append(len(evaluations) - 1), save(self, folder))[1],
    )

    summary = train_retriever(
        collection, name="patient", epochs=6, patience=2, batch_size=4, pairs=pairs, validation_pairs=pairs
    )

    assert [epoch["validation_loss"] for epoch in summary["history"]] == [1.0, 0.8, 0.9, 0.95]
    assert summary["best_validation_loss"] == 0.8 and summary["initial_validation_loss"] == 3.0
    assert saved_after_epoch == [1, 2]


def test_asymmetric_training_registers_separate_query_and_passage_encoders():
    collection = make_code_word_collection()

    summary = train_retriever(collection, name="two towers", asymmetric=True, max_steps=2, **FAST)

    retriever = Retriever.objects.get(pk=summary["retriever_id"])
    assert summary["steps"] == 2
    assert Path(retriever.model_path).is_dir() and Path(retriever.query_model_path).is_dir()
    assert retriever.model_path != retriever.query_model_path
    scorer = DenseScorer(retriever)
    assert scorer.query_model is not scorer.passage_model
    assert scorer.mask_token == "[MASK]"


def test_progress_reports_step_loss_and_eta():
    collection = make_code_word_collection()
    messages = []

    train_retriever(
        collection,
        name="chatty",
        max_steps=3,
        progress=lambda fraction, message: messages.append((fraction, message)),
        **FAST,
    )

    steps = [message for _, message in messages if message.startswith("step ")]
    assert steps and all(re.fullmatch(r"step \d+/3 loss \d+\.\d{3} eta \d+s", message) for message in steps)
    fractions = [fraction for fraction, _ in messages]
    assert fractions == sorted(fractions) and fractions[-1] <= 1.0


def test_every_batch_comes_from_one_book_and_never_repeats_a_query_or_positive():
    pairs = [
        TrainingPair(f"query {book}-{number % 5}", f"passage {book}-{number % 7}", group=f"book {book}")
        for book in range(3)
        for number in range(20)
    ]

    batches = same_group_batches(pairs, 4, random.Random(1))

    used = [pair for batch in batches for pair in batch]
    assert len(set(used)) == len(used) >= len(pairs) - 3  # at most a lone leftover per book is dropped
    for batch in batches:
        assert len({pair.group for pair in batch}) == 1
        assert len(batch) <= 4
        assert len({pair.query_text for pair in batch}) == len(batch)
        assert len({pair.positive_text for pair in batch}) == len(batch)


def test_a_lone_pair_without_hard_negatives_is_left_out():
    alone = TrainingPair("q", "p", group="short book")
    with_negative = TrainingPair("q2", "p2", ("n",), group="other book")

    batches = same_group_batches([alone, with_negative], 8, random.Random(0))

    assert batches == [[with_negative]]


def test_contrastive_loss_is_cross_entropy_of_each_query_against_its_own_positive():
    generator = torch.Generator().manual_seed(3)
    queries, candidates = torch.randn(3, 5, generator=generator), torch.randn(5, 5, generator=generator)

    loss = contrastive_loss(queries, candidates, scale=2.0).item()

    scores = 2.0 * queries.numpy().astype(np.float64) @ candidates.numpy().astype(np.float64).T
    log_softmax = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    assert loss == pytest.approx(-np.mean([log_softmax[i, i] for i in range(3)]), rel=1e-5)


def test_pairs_are_grouped_by_book_and_carry_the_mask_between_the_contexts():
    collection = make_code_word_collection()

    pairs = collection_pairs(collection, ["train"], 4, 4, "[MASK]")

    assert len(pairs) == 48
    assert len({pair.group for pair in pairs}) == 2
    assert pairs[0].query_text == "Here the zorblat theme returns. [MASK] The critic moves on."
    assert pairs[0].positive_text == "The telescope revealed faint galaxies and the rings of Saturn."


def test_held_out_validation_keeps_all_pairs_of_a_query_together():
    pairs = [TrainingPair(f"q{n // 2}", f"p{n}") for n in range(20)]

    train, validation = split_validation(pairs, 0.3, seed=4)

    assert len(validation) == 6 and len(train) == 14
    assert not {pair.query_text for pair in train} & {pair.query_text for pair in validation}


@pytest.mark.parametrize(
    ("settings_", "field"),
    [
        ({"batch_size": 1}, "batch_size"),
        ({"learning_rate": 0}, "learning_rate"),
        ({"epochs": 0}, "epochs"),
        ({"name": " "}, "name"),
    ],
)
def test_bad_settings_are_refused_before_anything_is_written(settings_, field, data_dir):
    collection = make_code_word_collection()

    with pytest.raises(InputError) as error:
        train_retriever(collection, **{"name": "bad", **settings_})

    assert error.value.field == field
    assert not Retriever.objects.exists() and not (data_dir / "models").exists()


def test_a_taken_name_and_a_collection_without_training_queries_are_refused(data_dir):
    collection = make_code_word_collection()
    Retriever.objects.create(name="taken", kind=Retriever.Kind.DENSE)
    collection.queries.update(split="test")

    with pytest.raises(InputError, match="already exists"):
        train_retriever(collection, name="taken")
    with pytest.raises(InputError, match="no training pairs"):
        train_retriever(collection, name="fresh", **FAST)
    assert Retriever.objects.count() == 1 and not (data_dir / "models").exists()


def test_the_command_trains_and_retrieve_can_use_the_result_by_name_or_id():
    collection = make_code_word_collection()

    summary = call_json_command(
        "train_retriever",
        "--collection",
        collection.name,
        "--name",
        "cmd-trained",
        "--batch-size",
        6,
        "--max-steps",
        2,
        "--context",
        "1/1",
    )

    assert {"retriever_id", "name", "model_path", "steps", "best_validation_loss"} <= set(summary)
    assert summary["context_left"] == 1 and summary["steps"] == 2
    for model in ("cmd-trained", summary["retriever_id"]):
        run = call_json_command("retrieve", "--collection", collection.name, "--retriever", "dense", "--model", model)
        assert run["queries"] == collection.queries.count()
    assert Retriever.objects.filter(kind="dense").count() == 1


def test_load_model_is_shared_within_a_process():
    assert load_model(default_model(), "cpu") is load_model(default_model(), "cpu")
