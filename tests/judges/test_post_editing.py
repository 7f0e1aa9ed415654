"""Post-editing as a recorded study condition: a judge's answers shown pre-selected on a seeded
share of a study's formal items; each judgment records whether it was shown one and kept it; the
report compares the conditions; annotators see the proposal itself and nothing about who made it;
a study without the condition serves exactly the payload it served before, in as many SQL
statements."""

import difflib
import random
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Item, Judgment, Study
from annotation.services.quality import designate_items
from evaluation.services import study_report
from jobs.models import Job
from judges.services import register_judge
from retrieval.models import Retriever
from tests.annotation.test_attacks import STAFF_ONLY_KEYS
from tests.annotation.test_query_counts import NEXT_CLAIMING, SUBMIT, budget
from tests.factories import (
    api_client,
    call_json_command,
    make_annotator,
    make_relic_proxy_study,
    make_user,
    next_url,
    submit_url,
)

pytestmark = pytest.mark.django_db

# The judge's name and its run's retriever: strings an annotator must never read.
JUDGE = "SECRET-PROPOSER-NAME"
RETRIEVER = "secret-proposing-retriever"
PAYLOAD_KEYS = {
    "finished", "study", "study_name", "kind", "guidelines", "item", "candidates", "context_left", "context_right",
    "query_text", "more_context", "expires_at", "progress", "qualification", "keys", "auto_advance",
}  # fmt: skip


def proposer(study: Study):
    """A run judge proposing, per proxy item, the candidate the study's negatives run scores highest."""
    Retriever.objects.filter(pk=study.negatives_run.retriever_id).update(name=RETRIEVER)
    return register_judge(JUDGE, "run", {"run": study.negatives_run_id})


def test_a_study_without_the_condition_serves_the_payload_it_always_served():
    study = make_relic_proxy_study(2)
    payload = api_client(make_annotator()).get(next_url(study)).json()
    assert set(payload) == PAYLOAD_KEYS


def test_a_seeded_share_of_the_formal_items_shows_the_judges_answer_and_judgments_record_it():
    study = make_relic_proxy_study(6)
    gold = designate_items(study, Item.Role.GOLD, count=1)[0]
    proposer(study)

    summary = call_json_command("post_edit", str(study.pk), "--judge", JUDGE, "--share", "0.5", "--seed", "3")

    formal = list(study.items.filter(role__in=["work", "gold"]).order_by("position"))
    picked = sorted(random.Random(3).sample(range(len(formal)), 3))
    assert (summary["selected"], summary["proposals"], summary["unreadable"]) == (3, 3, 0)
    assert [item.pk for item in formal if item.proposal] == [formal[i].pk for i in picked]
    study.refresh_from_db()
    assert study.parameters["post_editing"] == {"judge": JUDGE, "version": 1, "share": 0.5, "seed": 3, "items": 3}
    assert gold.pk in {item.pk for item in formal} and Item.objects.filter(role="gold").count() == 1

    keeper, changer = make_annotator("keeper"), make_annotator("changer")
    outcomes = {}
    for annotator in (keeper, changer):
        client = api_client(annotator)
        for _ in range(6):
            payload = client.get(next_url(study)).json()
            if payload["finished"]:
                break
            assert set(payload) == PAYLOAD_KEYS | {"proposal"}
            item = Item.objects.get(pk=payload["item"])
            assert payload["proposal"] == item.proposal
            position = item.proposal["position"] if item.proposal else 0
            if item.proposal and annotator == changer:
                position = (position + 1) % len(payload["candidates"])
            response = client.post(submit_url(study), {"item": item.pk, "position": position}, format="json")
            assert response.status_code == 201
            assert "proposal" not in response.content.decode()
            outcomes[(annotator.username, item.pk)] = bool(item.proposal)
    for judgment in Judgment.objects.filter(item__study=study):
        shown = outcomes[(judgment.annotator.username, judgment.item_id)]
        assert judgment.proposal_shown is shown
        assert judgment.proposal_kept is (None if not shown else judgment.annotator == keeper)


def test_the_report_compares_the_conditions():
    study = make_relic_proxy_study(4, judgments_per_item=2)
    proposer(study)
    call_json_command("post_edit", str(study.pk), "--judge", JUDGE, "--share", "0.5", "--seed", "1")
    keeper, changer = make_annotator("keeper"), make_annotator("changer")
    answers = {}
    for annotator in (keeper, changer):
        client = api_client(annotator)
        for _ in range(4):
            item = Item.objects.get(pk=client.get(next_url(study)).json()["item"])
            gold = item.candidates.get(is_gold=True).position
            position = item.proposal["position"] if item.proposal else gold
            if item.proposal and annotator == changer:
                position = gold if gold != position else (position + 1) % 3
            client.post(submit_url(study), {"item": item.pk, "position": position}, format="json")
            answers[(annotator.username, item.pk)] = (position, bool(item.proposal), gold)

    study.refresh_from_db()
    section = study_report(study)["post_editing"]

    assert section["condition"]["judge"] == JUDGE
    for name, shown in (("shown", True), ("not_shown", False)):
        mine = {key: value for key, value in answers.items() if value[1] is shown}
        condition = section["conditions"][name]
        assert condition["judgments"] == len(mine) == 4 and condition["items"] == 2
        assert condition["gold"]["judgments"] == 4
        assert condition["gold"]["accuracy"] == sum(p == g for p, _, g in mine.values()) / 4
        same = [
            answers[(other, item)][0] == position
            for (who, item), (position, _, _) in mine.items()
            for other in ("keeper", "changer")
            if other != who
        ]
        assert condition["agreement_with_others"]["share"] == sum(same) / len(same)
    assert section["conditions"]["shown"]["kept"] == {"judgments": 2, "share": 0.5}
    assert section["conditions"]["not_shown"]["kept"] is None
    assert "post_editing" not in study_report(make_relic_proxy_study(2))


def test_the_condition_is_set_before_anyone_answers_and_proposals_fit_the_study():
    study = make_relic_proxy_study(2)
    proposer(study)
    client = api_client(make_annotator())
    item = client.get(next_url(study)).json()["item"]
    client.post(submit_url(study), {"item": item, "position": 0}, format="json")

    with pytest.raises(CommandError, match="already has judgments") as refused:
        call_command("post_edit", str(study.pk), "--judge", JUDGE)
    assert "\n" not in str(refused.value)
    for share in ("0", "1.5", "-1"):
        with pytest.raises(CommandError, match="share"):
            call_command("post_edit", str(make_relic_proxy_study(2).pk), "--judge", JUDGE, "--share", share)
    assert not Item.objects.filter(proposal__isnull=False).exists()


def test_rest_sets_the_condition_as_a_job_and_tells_staff_how_it_went(eager_celery, django_capture_on_commit_callbacks):
    study = make_relic_proxy_study(3)
    judge = proposer(study)
    staff = api_client(make_user(staff=True))

    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post(f"/api/studies/{study.pk}/post-editing/", {"judge": judge.name}, format="json")

    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["job"]["id"])
    assert (job.kind, job.status, job.result["proposals"]) == ("post_edit", "succeeded", 3)
    state = staff.get(f"/api/studies/{study.pk}/post-editing/").json()
    assert state["condition"]["judge"] == JUDGE and state["items_with_proposal"] == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"judge": "nobody"}, "judge"),
        ({"judge": JUDGE, "share": 0}, "share"),
        ({"judge": JUDGE, "share": 2}, "share"),
        ({"judge": JUDGE, "share": "٠.5"}, "share"),
        ({"judge": JUDGE, "seed": -1}, "seed"),
    ],
)
def test_a_bad_request_is_a_400_naming_the_field_and_queues_nothing(body, field):
    study = make_relic_proxy_study(2)
    proposer(study)
    response = api_client(make_user(staff=True)).post(f"/api/studies/{study.pk}/post-editing/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Job.objects.exists()


def test_annotators_reach_neither_the_condition_nor_who_proposed():
    study = make_relic_proxy_study(3)
    proposer(study)
    call_json_command("post_edit", str(study.pk), "--judge", JUDGE)
    attacker = make_annotator("attacker")
    client = api_client(attacker)
    for method in ("get", "post"):
        response = getattr(client, method)(f"/api/studies/{study.pk}/post-editing/", {"judge": JUDGE})
        assert response.status_code == 403 and JUDGE not in response.content.decode()
    payload = client.get(next_url(study))
    body = payload.content.decode()
    assert JUDGE not in body and RETRIEVER not in body and '"judge"' not in body and '"version"' not in body
    assert not [key for key in STAFF_ONLY_KEYS if f'"{key}"' in body]
    browser = Client()
    browser.force_login(attacker)
    html = browser.get(f"/annotate/{study.pk}/").content.decode()
    assert "A suggested label is pre-selected" in html and JUDGE not in html and RETRIEVER not in html
    assert not Job.objects.exists()


def page_lines(browser: Client, study: Study) -> list[str]:
    """The annotation page's non-blank lines, without what changes on every request (the masked
    CSRF token)."""
    html = browser.get(f"/annotate/{study.pk}/").content.decode()
    lines = [re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", line) for line in html.splitlines()]
    return [line for line in lines if line.strip()]


def test_the_page_with_a_proposal_adds_the_pre_selection_and_not_one_word_of_provenance():
    """The same annotator on the same item, before and after the condition is set: the page
    gains exactly one line, the note with the value to pre-select; the API's payload gains
    exactly the key `proposal`, the value alone; neither the note nor the submit answer names
    a judge, a model or a machine, and the next page names no proposer either."""
    study = make_relic_proxy_study(2)
    proposer(study)
    annotator = make_annotator("reader")
    browser, client = Client(), api_client(annotator)
    browser.force_login(annotator)
    before, payload_before = page_lines(browser, study), client.get(next_url(study)).json()

    call_json_command("post_edit", str(study.pk), "--judge", JUDGE, "--share", "1.0")

    after, payload = page_lines(browser, study), client.get(next_url(study)).json()
    added = [line for line in difflib.ndiff(before, after) if line.startswith(("+ ", "- "))]
    item = Item.objects.get(pk=payload["item"])
    value = item.proposal["position"]
    note = (
        f'<p id="proposal" class="proposal-note" role="note" data-name="choice" data-value="{value}">'
        "A suggested label is pre-selected. Keep it, or choose another answer.</p>"
    )
    assert [line.strip() for line in added] == [f"+ {note}"]
    assert {key: value for key, value in payload.items() if key != "proposal"} == payload_before
    assert payload["proposal"] == {"position": item.proposal["position"]}
    response = client.post(submit_url(study), {"item": item.pk, "position": 0}, format="json")
    assert response.status_code == 201
    for text in (note, response.content.decode()):
        assert not re.search(r"\b(judge|model|LLM|GPT|AI|automatic|machine|proposed by)\b", text, re.I)
    next_page = browser.get(f"/annotate/{study.pk}/").content.decode()
    for body in (response.content.decode(), next_page):
        assert JUDGE not in body and RETRIEVER not in body and "proposal_kept" not in body


def test_in_a_study_that_shuffles_per_annotator_the_proposal_is_where_each_annotator_sees_it():
    """The proposal is stored as an item position; each annotator's payload names the place
    they see that candidate at, and answering that place keeps it."""
    study = make_relic_proxy_study(3)
    Study.objects.filter(pk=study.pk).update(candidate_order=Study.CandidateOrder.ANNOTATOR)
    proposer(study)
    call_json_command("post_edit", str(study.pk), "--judge", JUDGE, "--share", "1.0")
    places = set()
    for name in ("first", "second", "third", "fourth"):
        client = api_client(make_annotator(name))
        payload = client.get(next_url(study)).json()
        item = Item.objects.get(pk=payload["item"])
        proposed = item.candidates.get(position=item.proposal["position"])
        shown = payload["proposal"]["position"]
        assert payload["candidates"][shown]["id"] == proposed.pk
        places.add((item.pk, shown))
        response = client.post(submit_url(study), {"item": item.pk, "position": shown}, format="json")
        assert response.status_code == 201
        assert Judgment.objects.get(item=item, annotator__username=name).proposal_kept is True
    assert len({place for _, place in places}) > 1  # the orders really differ between annotators


def test_a_post_editing_study_costs_no_sql_statement_more_than_any_study(django_assert_max_num_queries):
    """The proposal rides on the item row the queue reads anyway, and the condition on the study
    row: the pinned budgets of tests/annotation/test_query_counts.py hold as they are."""
    study = make_relic_proxy_study(4)
    proposer(study)
    call_json_command("post_edit", str(study.pk), "--judge", JUDGE)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=make_annotator()).key}")
    for _ in range(3):
        with django_assert_max_num_queries(budget(NEXT_CLAIMING, "next")):
            payload = client.get(next_url(study)).json()
        assert payload["proposal"] is not None
        with django_assert_max_num_queries(budget(SUBMIT, "submit")):
            response = client.post(submit_url(study), {"item": payload["item"], "position": 0}, format="json")
        assert response.status_code == 201
