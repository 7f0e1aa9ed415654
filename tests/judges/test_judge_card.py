"""A judge's card, computed end to end against a scripted judge whose biases are known: a real
OpenAI-compatible server process that answers every k-way (proxy) prompt "ANSWER: 1" (a judge
that follows the position) and every relevance pair by the request's seed, "SCORE: 1", "SCORE: 1",
"SCORE: 0" for samples 0, 1, 2 (two of three votes relevant: confidence 2/3 everywhere). The
humans call one passage of three relevant, so the judge's majority is right on a third of the
pairs. Every figure is recomputed here from the stored answers by other means (scikit-learn's
kappa, numpy's polyfit, an ECE written with numpy.digitize). Cards of two versions (two prompts)
are compared; REST and the page's partial show them; annotators reach nothing."""

import json

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.template import Context, Template
from sklearn.metrics import cohen_kappa_score

from jobs.models import Job
from judges.models import Judge, JudgeAnswer, JudgeCard
from judges.prompts import UMBRELA
from judges.services import register_judge
from retrieval.models import Qrel
from tests.factories import (
    add_qrels,
    api_client,
    call_json_command,
    make_annotator,
    make_collection,
    make_relic_proxy_study,
    make_scored_run,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = pytest.mark.django_db

PROXY_MARK = "Candidate passages from the novel"  # in every proxy prompt (judges/prompts/proxy.txt)
VOTES = "SCORE: 1|SCORE: 1|SCORE: 0"


@pytest.fixture
def world():
    """Three queries, three passages each (the first relevant; lengths 4, 9 and 14 words), two
    runs (one ranking the relevant passage first, one last) and a proxy study to probe."""
    collection = make_collection("card-collection")
    first, last = {}, {}
    for number in range(3):
        query = make_text_query(collection, f"What does story {number} tell?", external_id=f"q{number}")
        passages = make_text_passages(collection, [" ".join([f"word{number}"] * (4 + 5 * index)) for index in range(3)])
        add_qrels(query, {passage: int(index == 0) for index, passage in enumerate(passages)})
        first[query] = {passage: 3 - index for index, passage in enumerate(passages)}
        last[query] = {passage: index for index, passage in enumerate(passages)}
    runs = [make_scored_run(collection, first), make_scored_run(collection, last)]
    return collection, runs, make_relic_proxy_study(3)


@pytest.fixture
def scripted(chat_server):
    server = chat_server("--keyword", PROXY_MARK, "--keyword-answer", "ANSWER: 1", "--answers-by-seed", VOTES)
    return server, register_judge("scripted", "openai", {"base_url": server.base_url, "model": "m", "retries": 0})


def card_command(collection, runs, probe, *options):
    return call_json_command(
        "judge_card",
        "scripted",
        "--collection",
        collection.name,
        "--runs",
        ",".join(str(run.pk) for run in runs),
        "--probe-study",
        str(probe.pk),
        "--samples",
        "3",
        "--bootstrap",
        "50",
        *options,
    )


def reference_ece(confidences, correct, bins=10):
    """Expected calibration error, written with numpy.digitize over equal-width bins (0, 0.1], ..."""
    confidences, correct = np.asarray(confidences), np.asarray(correct, dtype=float)
    index = np.clip(np.digitize(confidences, np.linspace(0, 1, bins + 1), right=True) - 1, 0, bins - 1)
    return sum(
        (index == b).mean() * abs(correct[index == b].mean() - confidences[index == b].mean())
        for b in range(bins)
        if (index == b).any()
    )


def test_the_card_measures_a_judge_whose_biases_are_known(world, scripted):
    collection, runs, probe = world
    server, judge = scripted

    card = card_command(collection, runs, probe)

    # Position: "ANSWER: 1" whatever the order: the same place every time, never the same candidate.
    assert card["position"]["items"] == card["position"]["answered_both"] == 3
    assert card["position"]["follows_position"] == 1.0 and card["position"]["same_candidate"] == 0.0
    assert card["position"]["place_counts"] == {"1": 6}

    # The pool: 9 pairs x 3 samples, all readable; the judge calls every pair relevant (2 of 3).
    assert (card["pool"]["pairs"], card["pool"]["samples"], card["pool"]["answered"]) == (9, 3, 27)
    assert card["unparseable"] == {"answers": 27, "failed": 0, "share": 0.0}
    answers = JudgeAnswer.objects.filter(judge=judge, item__isnull=True)
    votes: dict[tuple, list[int]] = {}
    for answer in answers:
        votes.setdefault((answer.query_id, answer.passage_id), []).append(answer.parsed["score"])
    human = {
        (qrel.query_id, qrel.passage_id): qrel.relevance for qrel in Qrel.objects.filter(query__collection=collection)
    }
    pairs = sorted(votes)
    judge_majority = [int(sum(v > 0 for v in votes[p]) * 2 > len(votes[p])) for p in pairs]
    humans = [int(human[p] > 0) for p in pairs]
    assert card["items"]["kappa"] == pytest.approx(cohen_kappa_score(humans, judge_majority))
    assert card["items"]["pairs"] == 9

    # Calibration: confidence 2/3 everywhere, right on a third of the pairs.
    confidences = [max(sum(v > 0 for v in votes[p]), sum(v == 0 for v in votes[p])) / 3 for p in pairs]
    correct = [j == h for j, h in zip(judge_majority, humans)]
    assert card["calibration"]["ece"] == pytest.approx(reference_ece(confidences, correct)) == pytest.approx(1 / 3)
    assert card["self_consistency"]["all_agree"] == 0.0

    # Length: the judge's labels do not move with length; the humans' fall (their relevant passage is the shortest).
    passages = {p.pk: len(p.text.split()) for p in collection.passages.all()}
    words = [passages[p] for _, p in pairs]
    assert card["length"]["judge_slope"] == 0.0
    assert card["length"]["human_slope"] == pytest.approx(np.polyfit(words, humans, 1)[0] * 100)

    # Leaderboard agreement beside it (the judge's qrels call everything relevant: every run ties).
    section = card["leaderboard"]["metrics"]["nDCG@10"]
    assert section["judge"][str(runs[0].pk)] == section["judge"][str(runs[1].pk)]
    assert section["kendall_tau"] is None

    stored = JudgeCard.objects.get(pk=card["card"])
    assert stored.judge == judge and stored.prompt["name"] == "relevance" and "SCORE: <value>" in stored.prompt["text"]
    assert stored.prompt["probe"]["name"] == "proxy"
    asked = len(server.requests())
    card_command(collection, runs, probe)  # a second card asks nothing again
    assert len(server.requests()) == asked and JudgeCard.objects.count() == 2


def test_cards_of_two_versions_compare_their_prompts(world, scripted):
    collection, runs, probe = world
    _, first = scripted
    card_command(collection, runs, probe)
    second = register_judge("scripted", "openai", {**first.settings, "prompt": UMBRELA})
    assert second.version == 2
    card_command(collection, runs, probe)

    compared = call_json_command("judge_card", "scripted", "--compare")["cards"]

    assert [card["version"] for card in compared] == [2, 1]
    assert [card["prompt"] for card in compared] == [UMBRELA, "relevance"]
    assert compared[0]["prompt_sha256"] != compared[1]["prompt_sha256"]
    assert all(card["follows_position"] == 1.0 for card in compared)

    rendered = Template("{% load judges_tags %}{% judge_cards judge %}").render(Context({"judge": second}))
    assert rendered.count('<tr data-card="') == 2 and "umbrela" in rendered
    assert "same place 1.000" in rendered and "ECE 0.333" in rendered


def test_an_imported_judge_gets_a_card_of_its_labels(world, tmp_path):
    collection = world[0]
    path = tmp_path / "other-lab.qrels"
    path.write_text("".join(f"{line}\n" for line in ("q0 0 d0 1", "q0 0 d1 1", "q1 0 d3 1", "q2 0 d6 0")))
    call_json_command("import_judge_labels", "other-lab", path, "--collection", collection.name)

    card = call_json_command("judge_card", "other-lab", "--collection", collection.name)

    assert card["pool"]["labelled"] == 4 and card["items"]["pairs"] == 4
    assert card["unparseable"]["share"] == 0.0 and card["calibration"] is None and card["position"] is None
    assert card["prompt"] == {"name": "imported", "file": "other-lab.qrels", "sha256": card["prompt"]["sha256"]}
    with pytest.raises(CommandError, match="one label per pair"):
        call_command("judge_card", "other-lab", "--collection", collection.name, "--samples", "2")


def test_rest_queues_a_card_and_lists_every_versions_cards(
    world, scripted, eager_celery, django_capture_on_commit_callbacks
):
    collection, runs, probe = world
    _, judge = scripted
    staff = api_client(make_user(staff=True))
    body = {
        "collection": collection.pk,
        "runs": ",".join(str(run.pk) for run in runs),
        "probe_study": probe.pk,
        "samples": 3,
        "bootstrap": 20,
    }

    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post(f"/api/judges/{judge.pk}/cards/", body, format="json")

    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["job"]["id"])
    assert (job.kind, job.status) == ("judge_card", Job.Status.SUCCEEDED), job.error
    listed = staff.get(f"/api/judges/{judge.pk}/cards/").json()
    assert listed["judge"] == "scripted" and len(listed["cards"]) == 1
    assert listed["cards"][0]["payload"]["position"]["follows_position"] == 1.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"collection": 999999}, "collection"),
        ({"collection": "٣"}, "collection"),
        ({"samples": 0}, "samples"),
        ({"samples": 21}, "samples"),
        ({"runs": "1,1"}, "runs"),
        ({"human": "judge:scripted"}, "human"),
        ({"human": "study:999999"}, "human"),
        ({"probe_study": "RELEVANCE"}, "probe_study"),
        ({"metrics": "nDCG@ten"}, "metrics"),
        ({"bootstrap": -1}, "bootstrap"),
    ],
)
def test_a_bad_card_request_is_a_400_naming_the_field_and_queues_nothing(world, scripted, change, field):
    collection, runs, probe = world
    _, judge = scripted
    relevance = call_json_command(
        "create_study",
        "--kind",
        "relevance",
        "--collection",
        collection.name,
        "--runs",
        str(runs[0].pk),
        "--depth",
        "1",
        "--seed",
        "1",
        "--name",
        "a relevance study",
    )["study_id"]
    body = {"collection": collection.pk, "runs": ",".join(str(run.pk) for run in runs), "probe_study": probe.pk}
    body.update({key: relevance if value == "RELEVANCE" else value for key, value in change.items()})

    response = api_client(make_user(staff=True)).post(f"/api/judges/{judge.pk}/cards/", body, format="json")

    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Job.objects.exists()


def test_annotators_and_strangers_reach_no_card(world, scripted):
    collection = world[0]
    _, judge = scripted
    JudgeCard.objects.create(judge=judge, collection=collection, human="imported", payload={"secret": "CARD-SECRET"})
    for client in (api_client(make_annotator()), api_client()):
        for method in ("get", "post"):
            response = getattr(client, method)(f"/api/judges/{judge.pk}/cards/", {"collection": collection.pk})
            assert response.status_code in (401, 403) and "CARD-SECRET" not in response.content.decode()
    assert not Job.objects.exists() and JudgeCard.objects.count() == 1
    assert json.dumps(Judge.objects.get(pk=judge.pk).settings)  # untouched
