"""A judge sees exactly what an annotator sees: prompts are built from the annotator payload, so
gold flags, provenance and external ids never reach them; answers are read strictly."""

import pytest

from annotation.models import ItemCandidate
from annotation.selectors import shown_item
from judges.parsing import parse_answer
from judges.prompts import Prompt, item_prompt
from retrieval.models import Run
from tests.factories import (
    add_label_item,
    make_collection,
    make_label_study,
    make_relic_proxy_study,
    make_text_passages,
    make_text_query,
)

pytestmark = pytest.mark.django_db


def test_a_proxy_prompt_shows_the_context_and_numbered_candidates_and_nothing_staff_only():
    study = make_relic_proxy_study(1)
    item = study.items.get()
    prompt = item_prompt(item)
    payload = shown_item(item)

    for sentence in payload["context_left"] + payload["context_right"]:
        assert sentence in prompt.text
    for number, candidate in enumerate(payload["candidates"], start=1):
        assert f"{number}. {candidate['text']}" in prompt.text
    assert "[masked sentence(s)]" in prompt.text
    for candidate in ItemCandidate.objects.filter(item=item).select_related("passage"):
        assert candidate.passage.external_id not in prompt.text
    assert "gold" not in prompt.text.lower()
    assert prompt.options == tuple(range(len(payload["candidates"])))


def test_which_candidate_is_gold_or_which_run_supplied_it_does_not_change_the_prompt():
    study = make_relic_proxy_study(1)
    item = study.items.get()
    before = item_prompt(item).hash
    other_run = Run.objects.exclude(pk=study.negatives_run_id).first() or study.negatives_run
    gold = item.candidates.get(is_gold=True)
    item.candidates.update(is_gold=False, source_rank=99, source_run=other_run)
    item.candidates.exclude(pk=gold.pk).filter(position=0 if gold.position else 1).update(is_gold=True)

    assert item_prompt(item).hash == before


def test_a_relevance_prompt_carries_guidelines_question_and_the_scale():
    collection = make_collection()
    study = make_label_study(
        collection,
        guidelines="The objective is to find the passage that supports a claim.",
        label_schema={"scale": "graded-0-2", "question": "How relevant is it?"},
    )
    query = make_text_query(collection, "Which passage supports the claim?", external_id="SECRET-QUERY-ID")
    add_label_item(study, query=query, passages=make_text_passages(collection, ["A passage about harbours."]))
    prompt = item_prompt(study.items.get())

    assert "The objective is to find the passage that supports a claim." in prompt.text
    assert "How relevant is it?" in prompt.text
    assert "0 (Not relevant), 1 (Partially relevant), 2 (Highly relevant)" in prompt.text
    assert "Which passage supports the claim?" in prompt.text and "A passage about harbours." in prompt.text
    assert "SECRET-QUERY-ID" not in prompt.text


PROXY = Prompt(({"role": "user", "content": "?"},), "proxy", (0, 1, 2))
SCALE = Prompt(
    ({"role": "user", "content": "?"},),
    "relevance",
    (0, 1, 2),
    ((0, "Not relevant"), (1, "Partially relevant"), (2, "Highly relevant")),
)
YES_NO = Prompt(({"role": "user", "content": "?"},), "quotability", (0, 1), ((0, "No"), (1, "Yes")))


@pytest.mark.parametrize(
    ("prompt", "text", "expected"),
    [
        (PROXY, "ANSWER: 2", ({"position": 1}, "")),
        (PROXY, "The answer is 3.", ({"position": 2}, "")),
        (PROXY, "ANSWER: 4", (None, "candidate 4 is not one of 1-3")),
        (PROXY, "", (None, "empty response")),
        (PROXY, "I cannot tell.", (None, "no number in the response")),
        (SCALE, "SCORE: 2", ({"label": 2}, "")),
        (SCALE, "score = 1 because", ({"label": 1}, "")),
        (SCALE, "SCORE: 7", (None, "7 is not on the scale (0, 1, 2)")),
        (SCALE, "SCORE: 1.5", (None, "1.5 is not a whole number")),
        (SCALE, "Not relevant", ({"label": 0}, "")),
        (SCALE, "Highly relevant.", ({"label": 2}, "")),
        (YES_NO, "Yes", ({"label": 1}, "")),
        (YES_NO, "yes or no", (None, "names several values (0, 1)")),
    ],
)
def test_answers_are_parsed_strictly_with_a_reason_when_they_cannot_be(prompt, text, expected):
    assert parse_answer(text, prompt) == expected
