"""What an annotator may do besides answering, through the API and the page: skip an item (it goes
to others, never back to them), mark an answer "unsure", flag a broken item for staff, take back
the answer just given within the grace period (never after, never someone else's), and read more
of the book around a candidate where the study allows it."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.test import Client

from annotation.models import Assignment, ItemCandidate, ItemFlag, Judgment, PeerReview, Study
from annotation.services import claim_next_item, submit_judgment, void_judgment
from retrieval.models import Sentence
from tests.factories import (
    api_client,
    book_sentence,
    make_annotator,
    make_plot_relevance_study,
    make_relic_proxy_study,
    make_user,
    next_url,
    response_text,
    submit_url,
)

pytestmark = pytest.mark.django_db


def skip_url(study) -> str:
    return f"/api/annotate/{study.pk}/skip/"


def flag_url(study) -> str:
    return f"/api/annotate/{study.pk}/flag/"


def undo_url(study) -> str:
    return f"/api/annotate/{study.pk}/undo/"


def context_url(study, candidate_id: int) -> str:
    return f"/api/annotate/{study.pk}/context/?candidate={candidate_id}"


def served_item(client, study) -> int | None:
    return client.get(next_url(study)).json()["item"]


def answer(client, study, item_id: int, **extra):
    return client.post(submit_url(study), {"item": item_id, "position": 0, **extra}, format="json")


# --- skip ----------------------------------------------------------------------------------------


def test_a_skipped_item_goes_to_someone_else_and_never_back_to_the_skipper():
    study = make_relic_proxy_study(2, judgments_per_item=1)
    skipper, other = make_annotator(), make_annotator()
    client = api_client(skipper)
    skipped = served_item(client, study)

    response = client.post(skip_url(study), {"item": skipped}, format="json")

    assert response.status_code == 200 and response.json() == {"item": skipped, "skipped": True, "created": True}
    assert Assignment.objects.get(item_id=skipped, annotator=skipper).state == Assignment.State.SKIPPED
    assert served_item(api_client(other), study) == skipped  # its one slot is free again
    following = served_item(client, study)
    assert following not in (skipped, None)
    answer(client, study, following)
    assert client.get(next_url(study)).json()["finished"] is True  # never served the skipped one again


def test_skipping_twice_is_idempotent_and_an_answer_after_a_skip_is_refused():
    study = make_relic_proxy_study(2)
    client = api_client(make_annotator())
    item = served_item(client, study)
    client.post(skip_url(study), {"item": item}, format="json")

    again = client.post(skip_url(study), {"item": item}, format="json")
    late_answer = answer(client, study, item)

    assert again.status_code == 200 and again.json()["created"] is False
    assert late_answer.status_code == 409 and "skipped" in late_answer.json()["detail"]
    assert not Judgment.objects.exists()


def test_an_annotator_cannot_skip_an_item_they_do_not_hold_and_the_holder_keeps_it():
    study = make_relic_proxy_study(2)
    holder, attacker = make_annotator(), make_annotator()
    held = claim_next_item(study, holder)

    response = api_client(attacker).post(skip_url(study), {"item": held.item_id}, format="json")

    assert response.status_code == 409
    held.refresh_from_db()
    assert held.state == Assignment.State.ACTIVE


def test_skip_names_a_missing_item():
    study = make_relic_proxy_study(1)
    response = api_client(make_annotator()).post(skip_url(study), {"item": 999999}, format="json")
    assert response.status_code == 400 and "item" in response.json()


# --- unsure --------------------------------------------------------------------------------------


def test_an_unsure_mark_is_kept_beside_the_answer_and_in_the_exports():
    study = make_relic_proxy_study(2)
    client = api_client(make_annotator())
    first = served_item(client, study)
    stored = answer(client, study, first, unsure=True)
    answer(client, study, served_item(client, study))

    staff = api_client(make_user(staff=True))
    rows = json.loads(response_text(staff.get(f"/api/judgments/?study={study.pk}")))
    exported = response_text(staff.get(f"/api/judgments/?study={study.pk}&format=csv"))
    table = list(csv.DictReader(io.StringIO(exported)))

    assert stored.status_code == 201 and stored.json()["unsure"] is True
    unsure_by_item = {row["item"]: row["unsure"] for row in rows}
    assert unsure_by_item.pop(first) is True and list(unsure_by_item.values()) == [False]
    assert sorted(row["unsure"] for row in table) == ["False", "True"]
    assert staff.get(f"/api/studies/{study.pk}/").json()["overview"]["unsure"] == 1


def test_the_page_posts_the_unsure_mark():
    study = make_relic_proxy_study(1)
    annotator = make_annotator()
    browser = Client()
    browser.force_login(annotator)
    page = browser.get(f"/annotate/{study.pk}/")
    item = Assignment.objects.get(annotator=annotator).item_id
    assert b'name="unsure"' in page.content

    browser.post(f"/annotate/{study.pk}/", {"item": item, "choice": 1, "unsure": "1"})

    assert Judgment.objects.get(annotator=annotator).unsure is True


# --- flag ----------------------------------------------------------------------------------------


def test_a_flag_reaches_staff_through_the_api_and_the_study_page_and_the_first_reason_stands():
    study = make_relic_proxy_study(2)
    annotator = make_annotator("flagger")
    client = api_client(annotator)
    item = served_item(client, study)

    first = client.post(flag_url(study), {"item": item, "reason": "The candidates repeat the context."}, format="json")
    second = client.post(flag_url(study), {"item": item, "reason": "Changed my mind."}, format="json")
    staff_user = make_user(staff=True)
    listed = api_client(staff_user).get(f"/api/studies/{study.pk}/item-flags/")
    page = Client()
    page.force_login(staff_user)
    detail = page.get(f"/studies/{study.pk}/").content.decode()

    assert first.status_code == 201 and second.status_code == 200 and second.json()["created"] is False
    assert [(row["item"], row["annotator"], row["reason"]) for row in listed.json()] == [
        (item, "flagger", "The candidates repeat the context.")
    ]
    assert 'id="item-flags"' in detail and "The candidates repeat the context." in detail
    assert served_item(client, study) == item  # flagging does not skip: the item is still theirs


def test_a_flag_needs_a_reason_and_an_item_the_annotator_was_given():
    study = make_relic_proxy_study(2)
    holder, attacker = make_annotator(), make_annotator()
    held = claim_next_item(study, holder)
    client = api_client(attacker)

    blank = client.post(flag_url(study), {"item": held.item_id, "reason": "   "}, format="json")
    not_theirs = client.post(flag_url(study), {"item": held.item_id, "reason": "broken"}, format="json")
    blank_of_holder = api_client(holder).post(flag_url(study), {"item": held.item_id, "reason": " "}, format="json")

    assert blank.status_code == 400
    assert not_theirs.status_code == 409 and "given" in not_theirs.json()["detail"]
    assert blank_of_holder.status_code == 400 and "reason" in blank_of_holder.json()
    assert not ItemFlag.objects.exists()


def test_annotators_and_anonymous_callers_cannot_read_flags():
    study = make_relic_proxy_study(1)
    flagger = make_annotator()
    item = served_item(api_client(flagger), study)
    api_client(flagger).post(flag_url(study), {"item": item, "reason": "secret complaint"}, format="json")
    url = f"/api/studies/{study.pk}/item-flags/"

    for client in (api_client(flagger), api_client(make_annotator())):
        response = client.get(url)
        assert response.status_code == 403 and b"secret complaint" not in response.content
    assert api_client().get(url).status_code in (401, 403)
    other_page = Client()
    other_page.force_login(make_annotator())
    assert b"secret complaint" not in other_page.get(f"/annotate/{study.pk}/").content


# --- undo ----------------------------------------------------------------------------------------


def test_undo_within_the_grace_period_withdraws_the_answer_and_serves_the_item_again():
    study = make_relic_proxy_study(3)
    annotator = make_annotator()
    client = api_client(annotator)
    first = served_item(client, study)
    stored = answer(client, study, first)
    claimed_next = served_item(client, study)

    response = client.post(undo_url(study))

    assert stored.json()["undo_until"] is not None
    assert response.status_code == 200 and response.json() == {"item": first, "undone": True}
    assert not Judgment.objects.exists()
    assert served_item(client, study) == first  # the same item, to be answered again
    assert Assignment.objects.get(item_id=claimed_next, annotator=annotator).state == Assignment.State.EXPIRED
    again = client.post(submit_url(study), {"item": first, "position": 2}, format="json")
    assert again.status_code == 201 and Judgment.objects.get().choice.position == 2


def test_after_the_grace_period_the_answer_is_final(settings):
    study = make_relic_proxy_study(2)
    client = api_client(make_annotator())
    item = served_item(client, study)
    answer(client, study, item)
    Judgment.objects.update(submitted_at=Judgment.objects.get().submitted_at - timedelta(seconds=11))

    response = client.post(undo_url(study))

    assert settings.MARGINALIA_UNDO_SECONDS == 10
    assert response.status_code == 409 and "final" in response.json()["detail"]
    assert client.get(undo_url(study)).json() == {"undo": None}
    assert Judgment.objects.count() == 1


def test_the_grace_period_is_a_setting(settings):
    settings.MARGINALIA_UNDO_SECONDS = 0
    study = make_relic_proxy_study(2)
    client = api_client(make_annotator())
    stored = answer(client, study, served_item(client, study))

    assert stored.json()["undo_until"] is None
    assert client.post(undo_url(study)).status_code == 409
    assert Judgment.objects.count() == 1


def test_an_annotator_cannot_undo_someone_elses_answer():
    study = make_relic_proxy_study(2)
    victim, attacker = make_annotator(), make_annotator()
    victim_client = api_client(victim)
    answer(victim_client, study, served_item(victim_client, study))

    response = api_client(attacker).post(undo_url(study))

    assert response.status_code == 409 and "no answer" in response.json()["detail"]
    assert Judgment.objects.filter(annotator=victim).count() == 1
    assert api_client().post(undo_url(study)).status_code in (401, 403)


def test_an_answer_someone_else_has_seen_cannot_be_taken_back():
    study = make_relic_proxy_study(2)
    annotator, reviewer = make_annotator(), make_annotator()
    client = api_client(annotator)
    answer(client, study, served_item(client, study))
    judgment = Judgment.objects.get()
    PeerReview.objects.create(judgment=judgment, reviewer=reviewer)

    reviewed = client.post(undo_url(study))
    PeerReview.objects.all().delete()
    void_judgment(judgment, by=make_user(staff=True), reason="test")
    voided = client.post(undo_url(study))

    assert reviewed.status_code == 409 and voided.status_code == 409
    assert "seen" in reviewed.json()["detail"]
    assert Judgment.objects.count() == 1


def test_a_skip_after_an_answer_settles_it_and_the_page_stops_offering_undo():
    study = make_relic_proxy_study(3)
    annotator = make_annotator()
    client = api_client(annotator)
    answered = served_item(client, study)
    answer(client, study, answered)
    offered = client.get(undo_url(study)).json()["undo"]
    skipped = served_item(client, study)

    client.post(skip_url(study), {"item": skipped}, format="json")
    refused = client.post(undo_url(study))
    browser = Client()
    browser.force_login(annotator)
    page = browser.get(f"/annotate/{study.pk}/").content.decode()

    assert offered["item"] == answered
    assert client.get(undo_url(study)).json() == {"undo": None}
    assert refused.status_code == 409 and "skipped an item since" in refused.json()["detail"]
    assert 'id="undo-form"' not in page
    assert Judgment.objects.get(annotator=annotator).item_id == answered


def test_undo_in_a_closed_study_is_refused():
    study = make_relic_proxy_study(2)
    client = api_client(make_annotator())
    answer(client, study, served_item(client, study))
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)

    assert client.post(undo_url(study)).status_code == 409
    assert Judgment.objects.count() == 1


def test_the_page_offers_undo_only_within_the_grace_period():
    study = make_relic_proxy_study(3)
    annotator = make_annotator()
    browser = Client()
    browser.force_login(annotator)
    browser.get(f"/annotate/{study.pk}/")
    item = Assignment.objects.get(annotator=annotator).item_id
    browser.post(f"/annotate/{study.pk}/", {"item": item, "choice": 0})

    offered = browser.get(f"/annotate/{study.pk}/").content.decode()
    undone = browser.post(f"/annotate/{study.pk}/undo/", follow=True).content.decode()
    browser.post(f"/annotate/{study.pk}/", {"item": item, "choice": 1})
    Judgment.objects.update(submitted_at=Judgment.objects.get().submitted_at - timedelta(minutes=1))
    later = browser.get(f"/annotate/{study.pk}/").content.decode()

    assert 'id="undo-form"' in offered
    assert "taken back" in undone and f'name="item" value="{item}"' in undone
    assert 'id="undo-form"' not in later
    assert Judgment.objects.get().choice.position == 1


# --- more context --------------------------------------------------------------------------------


def allowing_context(study: Study) -> Study:
    Study.objects.filter(pk=study.pk).update(more_context=True)
    study.refresh_from_db()
    return study


def test_more_context_shows_the_book_around_a_candidate_of_the_held_item():
    study = allowing_context(make_relic_proxy_study(2))
    client = api_client(make_annotator())
    payload = client.get(next_url(study)).json()
    candidate = ItemCandidate.objects.select_related("passage").get(pk=payload["candidates"][0]["id"])
    start = candidate.passage.start

    response = client.get(context_url(study, candidate.pk))

    assert payload["more_context"] is True
    assert response.status_code == 200
    body = response.json()
    assert body["sentences"] == [book_sentence(start)]
    assert body["before"] == [book_sentence(i) for i in range(max(0, start - 5), start)]
    book_length = Sentence.objects.filter(document=candidate.passage.document).count()
    assert body["after"] == [book_sentence(i) for i in range(start + 1, min(book_length, start + 6))]


def test_more_context_is_off_for_proxy_studies_by_default_and_then_refused():
    study = make_relic_proxy_study(2)
    client = api_client(make_annotator())
    payload = client.get(next_url(study)).json()

    response = client.get(context_url(study, payload["candidates"][0]["id"]))

    assert study.more_context is False and payload["more_context"] is False
    assert response.status_code == 403


def test_more_context_is_refused_for_items_the_annotator_does_not_hold_and_for_anonymous_callers():
    study = allowing_context(make_relic_proxy_study(3))
    holder, attacker = make_annotator(), make_annotator()
    held = claim_next_item(study, holder)
    others = ItemCandidate.objects.filter(item=held.item).first()
    attacker_client = api_client(attacker)
    attacker_client.get(next_url(study))  # the attacker holds an item of their own

    assert attacker_client.get(context_url(study, others.pk)).status_code == 409
    assert attacker_client.get(f"/api/annotate/{study.pk}/context/?candidate=x").status_code == 400
    assert api_client().get(context_url(study, others.pk)).status_code in (401, 403)
    submit_judgment(annotator=holder, item=held.item, position=0)
    # once answered, the item is no longer held: no context for it either
    assert api_client(holder).get(context_url(study, others.pk)).status_code == 409


def test_label_studies_allow_more_context_by_default_but_offer_it_only_for_book_passages():
    study = make_plot_relevance_study()
    client = api_client(make_annotator())

    payload = client.get(next_url(study)).json()

    assert study.more_context is True
    assert payload["more_context"] is False  # BEIR-style passages have no book around them
    assert client.get(context_url(study, payload["candidates"][0]["id"])).status_code == 409


def test_the_study_form_says_why_proxy_studies_keep_context_off():
    staff = Client()
    staff.force_login(make_user(staff=True))
    form = staff.get("/studies/new/").content.decode()
    assert "more context can give the answer away" in form
