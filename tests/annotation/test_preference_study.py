"""Preference studies: what each design asks, how answers are read and recorded, and how the
adaptive designs add pairs as judgments land (Clarke et al.'s top-k procedure and the
informative-pair rule), never past the budget."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from django.core.management.base import CommandError

from annotation.models import Item, ItemCandidate, Judgment, PreferenceQuery, Study
from annotation.services import claim_next_item, create_preference_study, import_judgments, submit_judgment
from annotation.services.annotator_actions import undo_last_submission, undoable_submission
from annotation.services.preference_designs import TopK, first_stage_pairs
from annotation.services.queue import SubmissionRejected
from retrieval.errors import InputError
from tests.factories import (
    api_client,
    call_json_command,
    make_annotator,
    make_preference_collection,
    make_preference_study,
    make_user,
    write_jsonl,
)

pytestmark = pytest.mark.django_db


def candidate_passages(item: Item) -> list[int]:
    return list(item.candidates.order_by("position").values_list("passage_id", flat=True))


def prefer_lower_ordinal(item: Item) -> int:
    """A consistent annotator: d0 is the best passage, d1 the next, and so on."""
    candidates = list(item.candidates.select_related("passage").order_by("position"))
    return min(candidates, key=lambda candidate: candidate.passage.ordinal).position


def judge_everything(study: Study, annotator) -> int:
    answered = 0
    while (assignment := claim_next_item(study, annotator)) is not None:
        submit_judgment(annotator=annotator, item=assignment.item, position=prefer_lower_ordinal(assignment.item))
        answered += 1
    return answered


# --- fixed designs ------------------------------------------------------------------------------------


def test_all_pairs_asks_every_pair_of_each_querys_pool_once_in_a_seeded_display_order():
    study = make_preference_study(n_queries=2, n_passages=5, design="all-pairs", seed=3)
    assert study.kind == Study.Kind.PREFERENCE and study.candidates_per_item == 2 and study.judgments_per_item == 3
    pairs = Counter(
        (item.query_id, frozenset(candidate_passages(item))) for item in study.items.prefetch_related("candidates")
    )
    assert len(pairs) == 2 * math.comb(5, 2) and set(pairs.values()) == {1}
    orders = {frozenset(candidate_passages(item)): candidate_passages(item) for item in study.items.all()}
    again = make_preference_study(n_queries=2, n_passages=5, design="all-pairs", seed=3)
    labels = {
        item.pk: [c.passage.external_id for c in item.candidates.order_by("position")] for item in again.items.all()
    }
    first = {
        item.pk: [c.passage.external_id for c in item.candidates.order_by("position")] for item in study.items.all()
    }
    assert sorted(map(tuple, labels.values())) == sorted(map(tuple, first.values()))  # same seed, same orders
    assert any(order != sorted(order) for order in orders.values())  # shuffled, not pool order
    assert all(
        candidate.source_run_id and candidate.source_rank
        for candidate in ItemCandidate.objects.filter(item__study=study)
    )


def test_a_random_design_asks_its_budget_of_distinct_pairs_per_query():
    study = make_preference_study(n_queries=3, n_passages=8, design="random", budget=6)
    per_query = Counter(study.items.values_list("query_id", flat=True))
    assert set(per_query.values()) == {6}
    pairs = [frozenset(candidate_passages(item)) for item in study.items.all()]
    assert len(set(zip(study.items.values_list("query_id", flat=True), pairs, strict=True))) == 18


def test_listwise_items_draw_each_passage_about_equally_often():
    study = make_preference_study(
        n_queries=1, n_passages=9, design="random", budget=6, label_schema={"shape": "listwise", "list_size": 3}
    )
    assert study.candidates_per_item == 3 and study.items.count() == 6
    shown = Counter(ItemCandidate.objects.filter(item__study=study).values_list("passage_id", flat=True))
    assert set(shown.values()) == {2}  # 18 places over 9 passages
    assert all(len(set(candidate_passages(item))) == 3 for item in study.items.all())


@pytest.mark.parametrize(
    "options, field",
    [
        ({"design": "sometimes"}, "design"),
        ({"design": "random"}, "budget"),
        ({"design": "all-pairs", "budget": 3}, "budget"),
        ({"design": "all-pairs", "label_schema": {"shape": "listwise"}}, "design"),
        ({"design": "adaptive", "rule": "informative"}, "budget"),
        ({"design": "adaptive", "top_k": 5, "pairings": 5}, "pairings"),
        ({"design": "adaptive", "pairings": 9, "all_pairs_below": 9}, "all_pairs_below"),
        ({"design": "all-pairs", "label_schema": {"shape": "pairwise", "list_size": 3}}, "label_schema.list_size"),
        ({"design": "all-pairs", "label_schema": {"ties": "yes"}}, "label_schema.ties"),
        ({"design": "all-pairs", "label_schema": {"colour": "red"}}, "label_schema.colour"),
        ({"design": "all-pairs", "runs": []}, "runs"),
    ],
)
def test_settings_the_designs_cannot_meet_are_refused_naming_the_field(options, field):
    collection, run = make_preference_collection(1, 4)
    options = {"runs": [run], **options}
    with pytest.raises(InputError) as refusal:
        create_preference_study(name="refused", collection=collection, depth=4, **options)
    assert refusal.value.field == field
    assert not Study.objects.filter(name="refused").exists()


def test_a_query_whose_pool_is_smaller_than_an_item_is_skipped_and_reported():
    collection, run = make_preference_collection(2, 3)
    with pytest.raises(InputError) as refusal:
        create_preference_study(
            name="lists of four",
            collection=collection,
            runs=[run],
            depth=3,
            design="random",
            budget=2,
            label_schema={"shape": "listwise", "list_size": 4},
        )
    assert refusal.value.field == "queries" and "its pool holds 3 passages; an item compares 4" in str(refusal.value)


# --- answers -------------------------------------------------------------------------------------------


def held_item(study: Study, annotator) -> Item:
    return claim_next_item(study, annotator).item


def test_a_pair_takes_a_preferred_candidate_a_tie_or_both_bad_and_records_the_order_shown():
    study = make_preference_study(n_queries=1, n_passages=4, design="all-pairs")
    annotator = make_annotator()
    item = held_item(study, annotator)
    shown = list(item.candidates.order_by("position").values_list("pk", flat=True))
    judgment = submit_judgment(annotator=annotator, item=item, position=1).judgment
    assert judgment.choice_id == shown[1] and judgment.label == {"order": [[1], [0]], "shown": shown}
    item = held_item(study, annotator)
    judgment = submit_judgment(annotator=annotator, item=item, label="tie").judgment
    assert judgment.choice is None and judgment.label["order"] == [[0, 1]]
    item = held_item(study, annotator)
    judgment = submit_judgment(annotator=annotator, item=item, label="both_bad").judgment
    assert judgment.label == {"both_bad": True, "shown": list(item.candidates.values_list("pk", flat=True))}


@pytest.mark.parametrize(
    "answer, field",
    [
        ({"label": "tie"}, "label"),
        ({"label": "both_bad"}, "label"),
        ({"position": 2}, "position"),
        ({"label": {"ranking": [[0], [0]]}}, "label.ranking"),
        ({"position": 0, "rationale": "because"}, "rationale"),
        ({}, "position"),
    ],
)
def test_answers_a_study_does_not_allow_are_refused_naming_the_field(answer, field):
    study = make_preference_study(
        n_queries=1, n_passages=3, design="all-pairs", label_schema={"ties": False, "bad": False}
    )
    annotator = make_annotator()
    item = held_item(study, annotator)
    with pytest.raises(SubmissionRejected) as refusal:
        submit_judgment(annotator=annotator, item=item, **answer)
    assert f"field '{field}'" in str(refusal.value)
    assert not Judgment.objects.exists()


def test_a_list_is_ranked_with_ranks_per_position_equal_ranks_tying():
    study = make_preference_study(
        n_queries=1, n_passages=6, design="random", budget=2, label_schema={"shape": "listwise", "list_size": 4}
    )
    annotator = make_annotator()
    item = held_item(study, annotator)
    judgment = submit_judgment(annotator=annotator, item=item, label={"ranks": [2, 1, 2, 4]}).judgment
    assert judgment.label["order"] == [[1], [0, 2], [3]]
    assert judgment.choice.position == 1
    item = held_item(study, annotator)
    with pytest.raises(SubmissionRejected, match="every one of the 4"):
        submit_judgment(annotator=annotator, item=item, label={"ranks": [1, 2, 3]})


def test_import_reads_preferred_ids_ties_and_rankings_like_web_answers(tmp_path):
    pairs = make_preference_study(n_queries=1, n_passages=3, design="all-pairs", judgments_per_item=1)
    items = list(pairs.items.prefetch_related("candidates__passage").order_by("position"))
    ids = [[c.passage.external_id for c in item.candidates.order_by("position")] for item in items]
    write_jsonl(
        tmp_path / "pairs.jsonl",
        [
            {"item": items[0].pk, "annotator": "ann", "preferred": ids[0][1]},
            {"item": items[1].pk, "annotator": "ann", "preferred": "tie"},
            {"item": items[2].pk, "annotator": "ann", "preferred": "both_bad"},
        ],
    )
    assert import_judgments(pairs, tmp_path / "pairs.jsonl").summary() == {"imported": 3, "rejected": 0}
    labels = dict(Judgment.objects.values_list("item_id", "label"))
    assert labels[items[0].pk]["order"] == [[1], [0]] and labels[items[1].pk]["order"] == [[0, 1]]
    assert labels[items[2].pk]["both_bad"] is True
    lists = make_preference_study(
        n_queries=1, n_passages=5, design="random", budget=1, label_schema={"shape": "listwise", "list_size": 3}
    )
    item = lists.items.get()
    shown = [c.passage.external_id for c in item.candidates.order_by("position")]
    write_jsonl(
        tmp_path / "lists.jsonl", [{"item": item.pk, "annotator": "ann", "ranking": [[shown[2], shown[0]], shown[1]]}]
    )
    import_judgments(lists, tmp_path / "lists.jsonl")
    assert Judgment.objects.get(item=item).label["order"] == [[0, 2], [1]]
    write_jsonl(tmp_path / "bad.jsonl", [{"item": item.pk, "annotator": "bob", "ranking": [shown[0], "elsewhere"]}])
    with pytest.raises(InputError) as refusal:
        import_judgments(lists, tmp_path / "bad.jsonl")
    assert (refusal.value.line, refusal.value.field) == (1, "ranking")


def test_exported_preference_rows_import_back_unchanged(tmp_path):
    from annotation.selectors import judgment_rows

    study = make_preference_study(n_queries=1, n_passages=3, design="all-pairs", judgments_per_item=1)
    annotator = make_annotator("exporter")
    judge_everything(study, annotator)
    rows = list(judgment_rows(study))
    write_jsonl(tmp_path / "again.jsonl", [json.loads(json.dumps(row, default=str)) for row in rows])
    assert import_judgments(study, tmp_path / "again.jsonl").summary() == {"imported": 0, "rejected": 3}


# --- adaptive designs ------------------------------------------------------------------------------------


def test_the_first_stage_pairs_every_contender_at_least_p_times_without_repeating_a_pair():
    import random

    pairs = first_stage_pairs(list(range(50)), 7, random.Random(0))
    counts = Counter(passage for pair in pairs for passage in pair)
    assert min(counts.values()) >= 7 and len(set(pairs)) == len(pairs)
    assert len(pairs) <= 50 * 7 // 2 + 50  # about p / 2 pairs per contender


@pytest.mark.parametrize("k", [1, 3])
def test_the_top_k_procedure_finds_a_consistent_annotators_top_k_with_fewer_pairs_than_all(k):
    study = make_preference_study(n_queries=1, n_passages=24, design="adaptive", top_k=k)
    procedure = TopK.with_defaults(k)
    assert study.parameters["design"] == {
        "design": "adaptive",
        "budget": None,
        "rule": "top-k",
        "top_k": k,
        "pairings": procedure.pairings,
        "all_pairs_below": procedure.all_pairs_below,
    }
    asked = judge_everything(study, make_annotator())
    state = PreferenceQuery.objects.get(study=study)
    ordinals = dict(state.query.collection.passages.values_list("pk", "ordinal"))
    assert state.status == PreferenceQuery.Status.DONE
    assert [ordinals[passage] for passage, _ in state.found[:k]] == list(range(k))
    assert asked == state.pairs == study.items.count() < math.comb(24, 2)


def test_a_round_reuses_pairs_judged_before_instead_of_asking_them_again():
    study = make_preference_study(n_queries=1, n_passages=20, design="adaptive", top_k=2)
    judge_everything(study, make_annotator())
    pairs = [frozenset(candidate_passages(item)) for item in study.items.all()]
    assert len(set(pairs)) == len(pairs)


def test_the_budget_stops_a_query_and_is_never_exceeded():
    study = make_preference_study(n_queries=2, n_passages=20, design="adaptive", top_k=2, budget=40)
    judge_everything(study, make_annotator())
    for state in PreferenceQuery.objects.filter(study=study):
        assert state.pairs <= 40 and state.status == PreferenceQuery.Status.BUDGET
    assert max(Counter(study.items.values_list("query_id", flat=True)).values()) <= 40


def test_the_informative_rule_asks_its_budget_of_distinct_pairs_a_batch_at_a_time():
    study = make_preference_study(n_queries=1, n_passages=8, design="adaptive", rule="informative", budget=12, batch=2)
    assert study.items.count() == 2  # one batch to start
    judge_everything(study, make_annotator())
    pairs = [frozenset(candidate_passages(item)) for item in study.items.all()]
    assert len(pairs) == len(set(pairs)) == 12
    assert PreferenceQuery.objects.get(study=study).status == PreferenceQuery.Status.BUDGET
    compared = Counter(passage for pair in pairs for passage in pair)
    assert len(compared) == 8  # uncertain pairs first: every passage was compared


def test_imported_answers_move_an_adaptive_study_on_too(tmp_path):
    study = make_preference_study(n_queries=1, n_passages=6, design="adaptive", rule="informative", budget=6, batch=3)
    rows = [
        {
            "item": item.pk,
            "annotator": "importer",
            "preferred": min(
                item.candidates.select_related("passage"), key=lambda c: c.passage.ordinal
            ).passage.external_id,
        }
        for item in study.items.all()
    ]
    write_jsonl(tmp_path / "answers.jsonl", rows)
    import_judgments(study, tmp_path / "answers.jsonl")
    assert study.items.count() == 6 and PreferenceQuery.objects.get(study=study).pairs == 6


def test_an_answer_that_decided_the_procedure_cannot_be_undone_but_others_can(settings):
    settings.MARGINALIA_UNDO_SECONDS = 60
    study = make_preference_study(n_queries=1, n_passages=4, design="adaptive", top_k=1)  # one final round
    annotator = make_annotator()
    for _ in range(5):
        item = held_item(study, annotator)
        submit_judgment(annotator=annotator, item=item, position=prefer_lower_ordinal(item))
    assert undoable_submission(study, annotator) is not None  # the round is still open: nothing decided
    undo_last_submission(study, annotator)
    submit_judgment(annotator=annotator, item=item, position=prefer_lower_ordinal(item))
    last = held_item(study, annotator)
    submit_judgment(annotator=annotator, item=last, position=prefer_lower_ordinal(last))
    assert PreferenceQuery.objects.get(study=study).status == PreferenceQuery.Status.DONE
    assert undoable_submission(study, annotator) is None
    with pytest.raises(SubmissionRejected, match="next pairs"):
        undo_last_submission(study, annotator)


def test_the_gold_peer_review_and_adjudication_machinery_refuses_preference_studies():
    from annotation.services.quality import adjudicate, designate_items, disagreement_items, sample_for_peer_review

    study = make_preference_study(n_queries=1, n_passages=3, design="all-pairs")
    Study.objects.filter(pk=study.pk).update(peer_review_rate=0.5)
    study.refresh_from_db()
    for attempt in (
        lambda: designate_items(study, Item.Role.GOLD, count=1),
        lambda: sample_for_peer_review(study),
        lambda: adjudicate(study.items.first(), by=None, position=0),
    ):
        with pytest.raises(InputError, match="preference study"):
            attempt()
    assert disagreement_items(study) == []


def test_the_pairs_of_every_query_stay_within_its_pool():
    study = make_preference_study(n_queries=2, n_passages=10, depth=6, design="adaptive", top_k=1)
    for state in PreferenceQuery.objects.filter(study=study):
        pool = set(state.pool)
        assert len(pool) == 6
        for item in study.items.filter(query=state.query):
            assert set(candidate_passages(item)) <= pool


def test_an_annotator_who_finds_no_pair_open_is_told_more_are_coming_and_gets_the_next_one():
    from annotation.services import next_work

    study = make_preference_study(n_queries=1, n_passages=4, design="adaptive", rule="informative", budget=3, batch=1)
    first, second = make_annotator(), make_annotator()
    held = held_item(study, first)
    waiting = next_work(study, second)
    assert waiting["finished"] and waiting["more_coming"]
    submit_judgment(annotator=first, item=held, position=0)
    assert next_work(study, second)["finished"] is False


# --- the ways in: command, API, staff form ---------------------------------------------------------


def test_create_study_makes_a_preference_study_with_the_contracted_options():
    collection, run = make_preference_collection(2, 6)
    summary = call_json_command(
        "create_study",
        *("--kind", "preference", "--collection", collection.name, "--runs", run.pk, "--depth", 5),
        *("--design", "adaptive", "--budget", 9, "--top-k", 1, "--name", "by command", "--no-ties"),
    )
    study = Study.objects.get(pk=summary["study_id"])
    assert summary["items"] == study.items.count() > 0 and summary["skipped"] == 0
    assert study.label_schema["ties"] is False and study.judgments_per_item == 1
    assert study.parameters["design"]["budget"] == 9
    with pytest.raises(CommandError, match="needs a design"):
        call_json_command("create_study", "--kind", "preference", "--collection", collection.name, "--name", "x")


def test_the_api_creates_preference_studies_and_refuses_other_kinds_settings():
    collection, run = make_preference_collection(1, 4)
    staff = api_client(make_user("boss", staff=True))
    body = {"kind": "preference", "name": "by api", "collection": collection.name, "runs": [run.pk], "depth": 4}
    created = staff.post("/api/studies/", {**body, "design": "random", "budget": 3}, format="json")
    assert created.status_code == 201 and created.json()["items"] == 3
    assert created.json()["study"]["judgments_per_item"] == 3
    foreign = staff.post("/api/studies/", {**body, "name": "other", "design": "all-pairs", "items": 3}, format="json")
    assert foreign.status_code == 400 and "items" in foreign.json()
    missing = staff.post("/api/studies/", {**body, "name": "third"}, format="json")
    assert missing.status_code == 400 and "design" in missing.json()


def test_the_staff_form_creates_a_preference_study(client):
    collection, run = make_preference_collection(1, 4)
    client.force_login(make_user("boss", staff=True))
    assert client.get("/studies/new/preference/").status_code == 200
    form = {
        "name": "by form",
        "collection": collection.pk,
        "runs": [run.pk],
        "depth": 4,
        "shape": "pairwise",
        "ties": "on",
        "design": "adaptive",
        "budget": 5,
        "rule": "informative",
        "top_k": 5,
        "batch": 2,
        "seed": 0,
        "context_left": 4,
        "context_right": 4,
        "claim_minutes": 30,
    }
    response = client.post("/studies/new/preference/", form)
    study = Study.objects.get(name="by form")
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/"
    assert study.label_schema["bad"] is False and study.parameters["design"]["rule"] == "informative"
    assert study.items.count() == 2 and client.get(f"/studies/{study.pk}/").status_code == 200


def test_every_staff_page_of_a_preference_study_opens(client, tmp_path):
    study = make_preference_study(n_queries=1, n_passages=4, design="adaptive", top_k=1)
    annotator = make_annotator()
    for _ in range(3):
        item = held_item(study, annotator)
        submit_judgment(annotator=annotator, item=item, position=prefer_lower_ordinal(item))
    client.force_login(make_user("boss", staff=True))
    for path in ("", "quality/", "adjudicate/", "report/", "recruiting/", "preferences/"):
        response = client.get(f"/studies/{study.pk}/{path}")
        assert response.status_code == 200, path
    page = client.get(f"/studies/{study.pk}/").content.decode()
    assert "Adaptive design" in page and ("chose 1" in page or "chose 2" in page)
    exported = call_json_command("export_dataset", study.pk, tmp_path / "dataset")
    assert exported["items"] == study.items.count() and exported["human_answers"] == 3


def test_a_crowd_participant_is_not_sent_to_the_completion_page_while_pairs_are_still_coming(client):
    from annotation.views import FINISHED_REDIRECTS_SESSION_KEY

    study = make_preference_study(n_queries=1, n_passages=4, design="adaptive", rule="informative", budget=3, batch=1)
    held_item(study, make_annotator())  # the one open pair is someone else's
    participant = make_annotator()
    client.force_login(participant)
    session = client.session
    session[FINISHED_REDIRECTS_SESSION_KEY] = {str(study.pk): "/crowd/somewhere/done/"}
    session.save()
    page = client.get(f"/annotate/{study.pk}/")
    assert page.status_code == 200 and b"come back in a moment" in page.content
