"""Human judgments as training pairs for dense retrievers: the gold (or, without one, a strict
majority's choice) is the positive; shown candidates nobody chose are hard negatives."""

import pytest
from django.core.management import CommandError

from annotation.models import Judgment
from annotation.training_pairs import study_training_pairs
from retrieval.errors import InputError
from retrieval.models import Retriever
from tests.factories import add_judgment, call_json_command, make_annotator, make_proxy_study

pytestmark = pytest.mark.django_db


def texts(item, *positions):
    return tuple(item.candidates.get(position=position).passage.text for position in positions)


def test_the_gold_is_the_positive_and_unchosen_candidates_are_hard_negatives():
    study = make_proxy_study(gold_positions=[0], candidates=4)
    item = study.items.get()
    add_judgment(item, make_annotator(), 0)
    add_judgment(item, make_annotator(), 2)  # a plausible distractor: not used as a negative

    [pair] = study_training_pairs(study, "[MASK]")

    assert pair.query_text == item.query.text
    assert pair.positive_text == texts(item, 0)[0]
    assert pair.hard_negatives == texts(item, 1, 3)
    assert pair.group == f"collection-{study.collection_id}"


def test_without_a_gold_a_strict_majority_choice_is_the_positive_and_a_split_vote_is_skipped():
    study = make_proxy_study(gold_positions=[0, 0])
    agreed, split = study.items.order_by("position")
    for item in (agreed, split):
        item.candidates.update(is_gold=False)
    for position in (1, 1, 2):
        add_judgment(agreed, make_annotator(), position)
    for position in (0, 1):
        add_judgment(split, make_annotator(), position)

    [pair] = study_training_pairs(study, None)

    assert pair.positive_text == texts(agreed, 1)[0]
    assert pair.hard_negatives == texts(agreed, 0)


def test_voided_judgments_do_not_count():
    study = make_proxy_study(gold_positions=[0])
    item = study.items.get()
    item.candidates.update(is_gold=False)
    judgment = add_judgment(item, make_annotator(), 1)
    Judgment.objects.filter(pk=judgment.pk).update(voided=True)

    with pytest.raises(InputError, match="no training pairs"):
        study_training_pairs(study, None)


def test_train_from_study_registers_a_retriever_trained_on_the_judgments(data_dir):
    study = make_proxy_study(gold_positions=[0, 1, 2, 0, 1, 2])

    summary = call_json_command(
        "train_from_study",
        study.pk,
        "--name",
        "from experts",
        "--batch-size",
        4,
        "--max-steps",
        1,
        "--validation-share",
        0.34,
    )

    retriever = Retriever.objects.get(pk=summary["retriever_id"])
    assert (retriever.name, retriever.trained_on) == ("from experts", study.collection)
    assert (summary["train_pairs"], summary["validation_pairs"], summary["steps"]) == (4, 2, 1)


def test_train_from_study_names_a_missing_study():
    with pytest.raises(CommandError, match="no study with id 999"):
        call_json_command("train_from_study", 999, "--name", "nothing")
