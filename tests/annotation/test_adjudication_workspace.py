"""The adjudication workspace as an adjudicator uses it, on its pages and over REST: the queue,
each item's answers side by side under pseudonyms, decisions with a reason from an editable
list, sending back, and who may do any of it."""

import json

import pytest
from django.urls import reverse

from annotation.exports import judgment_export
from annotation.models import Adjudication, AdjudicationReason, Item, Rework, Study
from annotation.services.adjudication import (
    DEFAULT_REASONS,
    adjudicable_studies,
    adjudicator_refusal,
    current_queue,
    decide,
    reasons,
    send_back,
    set_reasons,
)
from annotation.services.quality import block_annotator, designate_items
from retrieval.errors import InputError
from tests.factories import (
    add_judgment,
    add_label_judgment,
    api_client,
    grant,
    make_annotator,
    make_bulk_proxy_study,
    make_label_study,
    make_preference_study,
    make_relic_proxy_study,
    make_user,
)

pytestmark = pytest.mark.django_db


def make_adjudicator(username: str | None = None):
    """An account that is not staff, with the adjudicate permission."""
    return grant(make_user(username), "annotation.adjudicate")


def disputed_proxy_study(answers=((0, 1, 2), (1, 1, 2), (2, 2, 2)), **settings):
    """A closed proxy study naming its annotators ann-a, ann-b, ann-c, whose items got these
    positions from them (so an adjudicator, not named, is never given its items)."""
    study = make_relic_proxy_study(len(answers), **settings)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
    study.refresh_from_db()
    people = [make_annotator(f"ann-{letter}-{study.pk}") for letter in "abc"]
    study.annotators.add(*people)
    items = list(study.items.order_by("position"))
    for item, row in zip(items, answers):
        for person, position in zip(people, row):
            judgment = add_judgment(item, person, position=position)
            type(judgment).objects.filter(pk=judgment.pk).update(seconds=10.0 + position, rationale=f"why {position}")
    return study, items, people


def item_url(study, item):
    return reverse("item_adjudicate", args=[study.pk, item.pk])


def api(study, suffix=""):
    return f"/api/studies/{study.pk}/adjudication/{suffix}"


# --- who adjudicates ---------------------------------------------------------------------------------


def test_staff_and_accounts_with_the_permission_adjudicate_others_do_not():
    study, _, people = disputed_proxy_study()
    assert adjudicator_refusal(study, make_user(staff=True)) is None
    assert adjudicator_refusal(study, make_adjudicator()) is None
    assert adjudicator_refusal(study, make_annotator()) == "adjudicators and staff only"
    assert "you judged items of this study" in adjudicator_refusal(study, grant(people[0], "annotation.adjudicate"))


def test_an_adjudicator_who_could_be_given_the_studys_items_is_kept_out_until_staff_exclude_them():
    """Open or closed alike: seeing the answers first and judging afterwards is what is refused."""
    open_to_all = make_relic_proxy_study(1)
    Study.objects.filter(pk=open_to_all.pk).update(status=Study.Status.CLOSED)
    adjudicator = make_adjudicator()
    refusal = adjudicator_refusal(open_to_all, adjudicator)
    assert refusal and "block you from annotating it" in refusal
    assert open_to_all not in adjudicable_studies(adjudicator)
    block_annotator(open_to_all, adjudicator, by=None, reason="adjudicates this study", exclude_judgments=False)
    assert adjudicator_refusal(open_to_all, adjudicator) is None
    named, _, _ = disputed_proxy_study()  # names its annotators: the adjudicator is not one
    assert adjudicator_refusal(named, make_adjudicator()) is None
    assert {open_to_all, named} <= set(adjudicable_studies(adjudicator))
    assert adjudicable_studies(make_user(staff=True)) == []  # staff have the study pages


# --- the pages -----------------------------------------------------------------------------------------


def test_the_queue_page_lists_items_lowest_agreement_first_with_their_status(client):
    study, items, _ = disputed_proxy_study()
    client.force_login(make_user(staff=True))
    page = client.get(reverse("study_adjudicate", args=[study.pk])).content.decode()
    first, second = page.index(f'data-item="{items[0].pk}"'), page.index(f'data-item="{items[1].pk}"')
    assert first < second and f'data-item="{items[2].pk}"' not in page  # the unanimous one is not listed
    assert "0 %" in page and "33 %" in page and "Undecided" in page
    assert client.get(reverse("adjudication_next", args=[study.pk])).url == item_url(study, items[0])


def test_an_item_shows_every_answer_side_by_side_under_pseudonyms_names_for_staff_only(client):
    study, items, people = disputed_proxy_study()
    adjudicator = make_adjudicator()
    client.force_login(adjudicator)
    page = client.get(item_url(study, items[0])).content.decode()
    for letter in "ABC":
        assert f'<th scope="col" class="annotator">{letter}' in page
    assert "why 0" in page and "why 2" in page and "12.0" in page  # rationale, seconds
    assert not any(person.username in page for person in people) and "gold" not in page.lower()
    client.force_login(make_user(staff=True))
    staff_page = client.get(item_url(study, items[0])).content.decode()
    assert all(person.username in staff_page for person in people) and 'class="gold-mark"' in staff_page


def test_deciding_needs_a_reason_when_annotators_disagree_and_moves_on_to_the_next_item(client):
    study, items, _ = disputed_proxy_study()
    client.force_login(make_adjudicator())
    refused = client.post(item_url(study, items[0]), {"position": 1})
    assert refused.url == item_url(study, items[0]) and not Adjudication.objects.exists()
    decided = client.post(item_url(study, items[0]), {"position": 1, "reason": "Guideline gap", "note": "see 4.2"})
    assert decided.url == item_url(study, items[1])
    adjudication = Adjudication.objects.get(item=items[0])
    assert (adjudication.choice.position, adjudication.reason, adjudication.note) == (1, "Guideline gap", "see 4.2")
    last = client.post(item_url(study, items[1]), {"position": 1, "reason": "annotator error"})
    assert last.url == reverse("study_adjudicate", args=[study.pk]) + "?done=1"
    assert Adjudication.objects.get(item=items[1]).reason == "Annotator error"  # as the list spells it
    assert "Every item in the queue is decided." in client.get(last.url).content.decode()


def test_confirming_an_agreed_item_needs_no_reason(client):
    study, items, _ = disputed_proxy_study()
    client.force_login(make_user(staff=True))
    client.post(item_url(study, items[2]), {"position": 2})
    assert Adjudication.objects.get(item=items[2]).reason == ""


def test_sending_back_from_the_page_voids_the_answers_and_records_why(client):
    study, items, _ = disputed_proxy_study()
    client.force_login(make_adjudicator())
    url = reverse("item_send_back", args=[study.pk, items[0].pk])
    assert client.post(url, {"reason": ""}).url == item_url(study, items[0])  # a reason is required
    moved_on = client.post(url, {"reason": "Ambiguous item", "note": "two readings"})
    assert moved_on.url == item_url(study, items[1])
    rework = Rework.objects.get(item=items[0])
    assert (rework.reason, rework.note, len(rework.judgments)) == ("Ambiguous item", "two readings", 3)
    page = client.get(item_url(study, items[0])).content.decode()
    assert 'id="no-answers"' in page and "Ambiguous item" in page


def test_gold_items_and_other_studies_items_are_not_found_in_the_workspace(client):
    study, _, _ = disputed_proxy_study(answers=((0, 1, 2), (1, 1, 2)))
    _, other_items, _ = disputed_proxy_study()
    gold = make_relic_proxy_study(2)
    gold_item = designate_items(gold, Item.Role.GOLD, count=1)[0]
    client.force_login(make_user(staff=True))
    assert client.get(item_url(gold, gold_item)).status_code == 404
    assert client.get(reverse("item_adjudicate", args=[study.pk, other_items[0].pk])).status_code == 404


def test_staff_edit_the_reasons_per_study_and_globally(client):
    study, items, _ = disputed_proxy_study()
    staff = make_user(staff=True)
    client.force_login(staff)
    assert reasons(study).texts == list(DEFAULT_REASONS) and reasons(study).scope == "default"
    client.post(reverse("adjudication_global_reasons"), {"reasons": "Unclear guideline\nTypo in item\n"})
    assert reasons(study).texts == ["Unclear guideline", "Typo in item"] and reasons(study).scope == "global"
    client.post(reverse("adjudication_reasons", args=[study.pk]), {"reasons": "Spoiler\n  Bad  context \n"})
    assert reasons(study).texts == ["Spoiler", "Bad context"] and reasons(None).texts[0] == "Unclear guideline"
    refused = client.post(item_url(study, items[0]), {"position": 0, "reason": "Guideline gap"})
    assert refused.url == item_url(study, items[0]) and not Adjudication.objects.exists()
    client.post(reverse("adjudication_reasons", args=[study.pk]), {"reasons": ""})
    assert reasons(study).scope == "global"
    client.force_login(make_adjudicator())
    assert client.post(reverse("adjudication_global_reasons"), {"reasons": "Mine"}).status_code == 403


def test_reasons_lists_refuse_empty_repeated_and_overlong_entries_and_change_nothing():
    set_reasons(None, ["One", "Two"])
    for bad in (["One", "one"], [" "], ["x" * 201], [f"r{n}" for n in range(13)], ["bad\x00"]):
        with pytest.raises(InputError) as refused:
            set_reasons(None, bad)
        assert refused.value.field == "reasons"
    assert reasons(None).texts == ["One", "Two"]
    assert set_reasons(None, []).texts == list(DEFAULT_REASONS) and not AdjudicationReason.objects.exists()


def test_staff_set_the_sample_of_agreed_items_from_the_queue_page(client):
    study, _, _ = disputed_proxy_study(answers=((0, 1, 2), (1, 1, 1), (2, 2, 2), (0, 0, 0)))
    client.force_login(make_user(staff=True))
    client.post(reverse("adjudication_sample", args=[study.pk]), {"sample_rate": "50"})
    study.refresh_from_db()
    assert study.adjudication_sample_rate == 0.5 and current_queue(study).sampled == 2
    assert client.post(reverse("adjudication_sample", args=[study.pk]), {"sample_rate": "150"}).status_code == 302
    study.refresh_from_db()
    assert study.adjudication_sample_rate == 0.5


def test_a_large_queue_is_paged(client):
    study = make_bulk_proxy_study(400, gold_share=0.4, seed=3)
    client.force_login(make_user(staff=True))
    url = reverse("study_adjudicate", args=[study.pk])
    first, second = client.get(url).content.decode(), client.get(url + "?page=2").content.decode()
    entries = current_queue(study).disputed
    assert first.count('class="queue-row') == 50 and second.count('class="queue-row') == 50
    assert f"entries 1–50 of {entries}" in first and f"entries 51–100 of {entries}" in second


# --- REST ------------------------------------------------------------------------------------------------


def test_the_rest_queue_next_item_and_answers():
    study, items, people = disputed_proxy_study()
    client = api_client(make_adjudicator())
    queue = client.get(api(study, "queue/")).json()
    assert [row["item"] for row in queue["results"]] == [items[0].pk, items[1].pk]
    assert queue["queue"]["undecided"] == 2 and "query" not in queue["results"][0]
    following = client.get(api(study, "next/")).json()
    assert following["item"] == items[0].pk and following["queue"]["number"] == 1
    answers = following["judgments"]
    assert [answer["annotator"] for answer in answers] == ["A", "B", "C"] and "name" not in answers[0]
    assert [answer["seconds"] for answer in answers] == [10.0, 11.0, 12.0]
    assert "gold_position" not in following and following["reason_required"]
    assert client.get(api(study, f"next/?after={items[0].pk}")).json()["item"] == items[1].pk
    staff_view = api_client(make_user(staff=True)).get(api(study, f"items/{items[0].pk}/")).json()
    assert [answer["name"] for answer in staff_view["judgments"]] == [person.username for person in people]
    assert client.get(api(study, "next/?after=x")).status_code == 400


def test_the_rest_decision_and_send_back():
    study, items, _ = disputed_proxy_study()
    client = api_client(make_adjudicator())
    missing = client.post(api(study, f"items/{items[0].pk}/decide/"), {"position": 2}, format="json")
    assert missing.status_code == 400 and "reason" in missing.json()
    unknown = client.post(api(study, f"items/{items[0].pk}/decide/"), {"position": 2, "reason": "?"}, format="json")
    assert unknown.status_code == 400 and "reason" in unknown.json()
    decided = client.post(
        api(study, f"items/{items[0].pk}/decide/"), {"position": 2, "reason": "Broken item"}, format="json"
    ).json()
    assert (decided["position"], decided["reason"], decided["next"]) == (2, "Broken item", items[1].pk)
    sent = client.post(api(study, f"items/{items[1].pk}/send-back/"), {"reason": "Guideline gap"}, format="json")
    assert sent.status_code == 201 and len(sent.json()["judgments"]) == 3 and sent.json()["next"] is None
    again = client.post(api(study, f"items/{items[1].pk}/send-back/"), {"reason": "Guideline gap"}, format="json")
    assert again.status_code == 400 and "item" in again.json()
    assert client.get(api(study, "next/")).json() == {"finished": True, "item": None}


def test_the_rest_reasons_and_sample_settings():
    study, _, _ = disputed_proxy_study()
    staff, adjudicator = api_client(make_user(staff=True)), api_client(make_adjudicator())
    assert adjudicator.get(api(study, "reasons/")).json()["reasons"] == list(DEFAULT_REASONS)
    assert adjudicator.put(api(study, "reasons/"), {"reasons": ["x"]}, format="json").status_code == 403
    assert adjudicator.put("/api/adjudication/reasons/", {"reasons": ["x"]}, format="json").status_code == 403
    assert adjudicator.put(api(study, "queue/"), {"sample_rate": 0.5}, format="json").status_code == 403
    own = staff.put(api(study, "reasons/"), {"reasons": ["Spoiler", "Typo"]}, format="json").json()
    assert own == {"study": study.pk, "reasons": ["Spoiler", "Typo"], "scope": "study"}
    assert staff.put("/api/adjudication/reasons/", {"reasons": ["A", "a"]}, format="json").status_code == 400
    assert staff.get("/api/adjudication/reasons/").json()["scope"] == "default"
    assert staff.put(api(study, "queue/"), {"sample_rate": 2}, format="json").status_code == 400
    assert staff.put(api(study, "queue/"), {"sample_rate": 1}, format="json").json()["sampled"] == 1


def test_label_items_are_decided_with_a_scale_value_over_rest():
    study = make_label_study(items=1, label_schema={"scale": "graded-0-3"})
    item = study.items.get()
    for label in (0, 3):
        add_label_judgment(item, make_annotator(), label, spans=[{"target": "passage", "start": 0, "end": 4}])
    client = api_client(make_user(staff=True))
    answers = client.get(api(study, f"items/{item.pk}/")).json()
    passage = answers["candidates"][0]["text"]
    assert answers["agreement"] == 0 and answers["judgments"][0]["spans"][0]["text"] == passage[:4]
    decide = api(study, f"items/{item.pk}/decide/")
    decided = client.post(decide, {"label": 2, "reason": "Ambiguous item"}, format="json")
    assert decided.status_code == 200 and decided.json()["label"] == 2
    bad = client.post(decide, {"label": 9, "reason": "Ambiguous item"}, format="json")
    assert bad.status_code == 400 and "label" in bad.json()


def test_a_preference_study_has_nothing_to_adjudicate_and_its_exports_carry_no_item_label(client):
    """Two annotators who order a pair differently disagree, but in a preference study that is
    data for the scores, not an error to decide (quality.disagreement_items lists none): the
    queue is empty, its items are not found, deciding and sending back are refused, nothing is
    written, and the exports leave the item label empty as for gold items."""
    study = make_preference_study(n_queries=1, n_passages=3, design="all-pairs")
    item = study.items.order_by("position").first()
    for person, position in zip((make_annotator(), make_annotator()), (0, 1)):
        add_judgment(item, person, position=position)
    staff = make_user(staff=True)
    client.force_login(staff)
    assert client.get(reverse("study_adjudicate", args=[study.pk])).status_code == 200
    assert current_queue(study).disputed == 0
    assert client.get(item_url(study, item)).status_code == 404
    rest = api_client(staff)
    assert rest.get(api(study, f"items/{item.pk}/")).status_code == 404
    decided = rest.post(api(study, f"items/{item.pk}/decide/"), {"position": 0, "reason": "Broken item"}, format="json")
    assert decided.status_code == 404
    with pytest.raises(InputError) as refused:
        send_back(item, by=staff, reason="Broken item")
    assert refused.value.field == "study"
    with pytest.raises(InputError):
        decide(item, by=staff, position=0, reason="Broken item")
    assert not Adjudication.objects.exists() and not Rework.objects.exists()
    assert not item.judgments.filter(voided=True).exists()
    rows = [json.loads(line) for chunk in judgment_export(study, "jsonl") for line in chunk.splitlines()]
    assert len(rows) == 2 and {(row["item_label"], row["label_source"], row["reworks"]) for row in rows} == {
        (None, None, None)
    }
