"""Judges answer preference items like people: the prompt is built from the annotator's payload
(the pair as shown, the question, the answers the study allows), answers are read strictly, and a
judge behind a real OpenAI-compatible server process (tests/judges/openai_server.py) ends up in the
preference report beside the humans."""

import pytest

from annotation.models import ItemCandidate
from annotation.selectors import shown_item
from annotation.services import import_judgments
from evaluation.preference_report import preference_study_report
from judges.asking import judge_study
from judges.models import JudgeAnswer
from judges.parsing import parse_answer
from judges.prompts import Prompt, item_prompt
from judges.services import register_judge
from retrieval.errors import InputError
from tests.factories import make_preference_study, write_jsonl

pytestmark = pytest.mark.django_db


def test_a_preference_prompt_shows_the_pair_as_annotators_see_it_and_the_answers_allowed():
    study = make_preference_study(n_queries=1, n_passages=3, design="all-pairs", label_schema={"bad": False})
    item = study.items.first()
    prompt = item_prompt(item)
    payload = shown_item(item)
    assert payload["query_text"] in prompt.text and payload["preference"]["question"] in prompt.text
    for number, candidate in enumerate(payload["candidates"], start=1):
        assert f"{number}. {candidate['text']}" in prompt.text
    for candidate in ItemCandidate.objects.filter(item=item).select_related("passage", "source_run"):
        assert candidate.passage.external_id not in prompt.text
    assert "tie (equally good)" in prompt.text and "both bad" not in prompt.text
    assert (prompt.kind, prompt.options, prompt.words) == ("preference", (0, 1), ("tie",))


def test_lists_are_not_put_to_judges():
    study = make_preference_study(
        n_queries=1, n_passages=5, design="random", budget=1, label_schema={"shape": "listwise", "list_size": 3}
    )
    with pytest.raises(InputError, match="judges answer pairwise"):
        item_prompt(study.items.get())


PAIR = Prompt(({"role": "user", "content": "x"},), "preference", (0, 1), words=("tie", "both_bad"))
STRICT = Prompt(({"role": "user", "content": "x"},), "preference", (0, 1), words=())


@pytest.mark.parametrize(
    "prompt, text, expected",
    [
        (PAIR, "ANSWER: 2", ({"position": 1}, "")),
        (PAIR, "Passage 1 is better.", ({"position": 0}, "")),
        (PAIR, "ANSWER: tie", ({"label": "tie"}, "")),
        (PAIR, "answer = Both bad", ({"label": "both_bad"}, "")),
        (PAIR, "They are equally good.", ({"label": "tie"}, "")),
        (PAIR, "Neither of them.", ({"label": "both_bad"}, "")),
        (PAIR, "A tie, or maybe neither.", (None, "says both 'tie' and 'both bad'")),
        (PAIR, "ANSWER: 3", (None, "candidate 3 is not one of 1-2")),
        (PAIR, "", (None, "empty response")),
        (STRICT, "ANSWER: tie", (None, "'tie' is not an answer this study allows")),
        (STRICT, "no idea", (None, "no number in the response")),
    ],
)
def test_preference_answers_are_read_strictly(prompt, text, expected):
    assert parse_answer(text, prompt) == expected


def test_a_judge_behind_a_real_endpoint_is_reported_against_the_human_majority(chat_server, tmp_path):
    server = chat_server("--answer", "ANSWER: 1")
    judge = register_judge("pairs", "openai", {"base_url": server.base_url, "model": "served", "retries": 1})
    study = make_preference_study(n_queries=1, n_passages=4, design="all-pairs", judgments_per_item=2)
    items = list(study.items.prefetch_related("candidates__passage").order_by("position"))
    rows = []
    for item in items:
        shown = [c.passage.external_id for c in sorted(item.candidates.all(), key=lambda c: c.position)]
        rows += [
            {"item": item.pk, "annotator": "ann", "preferred": shown[0]},
            {"item": item.pk, "annotator": "ben", "preferred": min(shown)},
        ]
    write_jsonl(tmp_path / "answers.jsonl", rows)
    import_judgments(study, tmp_path / "answers.jsonl")

    summary = judge_study(study, judge)
    assert (summary["answered"], summary["failed"]) == (6, 0) and len(server.requests()) == 6
    assert all(answer.parsed == {"position": 0} for answer in JudgeAnswer.objects.filter(judge=judge))

    section = preference_study_report(study)["judges"]["pairs"]
    first_is_smaller = [
        min(row["preferred"] for row in rows[i : i + 2]) == rows[i]["preferred"] for i in range(0, 12, 2)
    ]
    unanimous = sum(first_is_smaller)  # both chose the passage shown first: a majority, and the judge's answer
    assert section["vs_majority"] == {
        "items": unanimous,
        "agreement": 1.0,
        "cohen_kappa": section["vs_majority"]["cohen_kappa"],
    }
    assert section["vs_annotators"]["ann"] == {"items": 6, "agreement": 1.0}
    assert section["vs_annotators"]["ben"] == {"items": 6, "agreement": pytest.approx(unanimous / 6)}
    assert section["humans_agree_judge_differs"] == []
