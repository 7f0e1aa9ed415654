"""A study's presentation settings (issue 24.4 and 24.5): the candidate order and the annotation
page's keys, set on the staff form, through POST /api/studies/ or /api/studies/ID/presentation/,
validated (no key twice, none the page keeps, none a scale owns, enough option keys), and what
annotators get of them: their own order and the keys, never the gold, the item positions or
anyone's provenance."""

import json

import pytest
from django.test import Client

from annotation.models import ItemCandidate, Judgment, Study
from annotation.presentation import DEFAULT_KEYS, annotator_order, validate_keyboard
from annotation.services.presentation import apply_presentation
from retrieval.errors import InputError
from tests.factories import (
    api_client,
    export_study,
    make_annotator,
    make_label_study,
    make_neighbour_run,
    make_plot_relevance_study,
    make_relic_collection,
    make_relic_proxy_study,
    make_user,
    next_url,
    response_text,
    submit_url,
    write_jsonl,
)

pytestmark = pytest.mark.django_db


def presentation_url(study) -> str:
    return f"/api/studies/{study.pk}/presentation/"


# --- the keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keyboard", "field", "words"),
    [
        ({"options": "asdf"}, "keyboard.options", "'s' is also the skip key"),
        ({"skip": "r"}, "keyboard.skip", "'r' is also the flag key"),
        ({"options": "1123"}, "keyboard.options", "'1' picks two options"),
        ({"undo": "?"}, "keyboard.undo", "kept by the page"),
        ({"mark": "mm"}, "keyboard.mark", "one key"),
        ({"skip": " "}, "keyboard.skip", "visible characters"),
        ({"skip": 5}, "keyboard.skip", "a text of keys"),
        ({"submit": "x"}, "keyboard.submit", "unknown name"),
        ({"options": ""}, "keyboard.options", "give the keys"),
        ([], "keyboard", "JSON object"),
    ],
)
def test_keys_that_clash_or_are_reserved_are_refused_by_name(keyboard, field, words):
    with pytest.raises(InputError) as refused:
        validate_keyboard(keyboard)
    assert refused.value.field == field and words in refused.value.message


def test_keys_are_stored_lower_case_and_only_where_they_differ_from_the_defaults():
    assert validate_keyboard({"options": "ASDF", "skip": "X", "flag": "r"}) == {"options": "asdf", "skip": "x"}
    assert validate_keyboard({"flag": ""}) == {"flag": ""}  # no key for flagging
    assert validate_keyboard({"skip": "x", "undo": "s"}) == {"skip": "x", "undo": "s"}  # s freed, then taken


def test_a_label_scale_keeps_its_own_keys_and_a_proxy_study_needs_a_key_per_candidate():
    graded = make_plot_relevance_study(label_schema={"scale": "graded-0-3"})
    yes_no = make_label_study(kind=Study.Kind.QUOTABILITY, items=1)
    proxy = make_relic_proxy_study(2, candidates=5)

    for study, keyboard, field, words in (
        (graded, {"skip": "3"}, "keyboard.skip", "'3' answers this study's scale"),
        (yes_no, {"unsure": "y"}, "keyboard.unsure", "'y' answers this study's scale"),
        (proxy, {"options": "asdf"}, "keyboard.options", "items show up to 5 options"),
    ):
        with pytest.raises(InputError) as refused:
            apply_presentation(study, keyboard={**keyboard, "skip": keyboard.get("skip", "x")})
        assert refused.value.field == field and words in refused.value.message
    # Digits a proxy study does not use for its options are free for actions.
    assert apply_presentation(proxy, keyboard={"options": "asdfg", "skip": "x", "undo": "1"}).keyboard == {
        "options": "asdfg",
        "skip": "x",
        "undo": "1",
    }


# --- staff set them ------------------------------------------------------------------------------


def test_staff_create_a_shuffled_study_with_keys_through_the_api_and_change_them_later():
    collection = make_relic_collection(4)
    run = make_neighbour_run(collection)
    client = api_client(make_user(staff=True))
    body = {"name": "keyed", "collection": collection.name, "negatives_run": run.pk, "items": 3, "seed": 4}

    created = client.post(
        "/api/studies/",
        {**body, "candidate_order": "annotator", "keyboard": {"options": "jkl", "skip": "x"}, "auto_advance": True},
        format="json",
    )
    refused = client.post("/api/studies/", {**body, "name": "clash", "keyboard": {"skip": "r"}}, format="json")
    study = Study.objects.get(name="keyed")
    changed = client.patch(presentation_url(study), {"keyboard": {"options": "jkl;"}}, format="json")

    assert created.status_code == 201, created.content
    assert created.json()["study"]["candidate_order"] == "annotator"
    assert created.json()["study"]["keyboard"] == {"options": "jkl", "skip": "x"}
    assert created.json()["study"]["auto_advance"] is True
    assert refused.status_code == 400 and "keyboard.skip" in refused.json()
    assert not Study.objects.filter(name="clash").exists()  # nothing left behind
    assert changed.status_code == 200 and changed.json() == {
        "candidate_order": "annotator",
        "keyboard": {"options": "jkl;"},
        "auto_advance": True,
    }
    assert client.get(presentation_url(study)).json()["keyboard"] == {"options": "jkl;"}


def test_the_order_cannot_change_once_a_study_has_judgments():
    study = make_relic_proxy_study(2)
    client = api_client(make_user(staff=True))
    assert client.patch(presentation_url(study), {"candidate_order": "annotator"}, format="json").status_code == 200
    annotator = api_client(make_annotator())
    item = annotator.get(next_url(study)).json()["item"]
    annotator.post(submit_url(study), {"item": item, "position": 0}, format="json")

    response = client.patch(presentation_url(study), {"candidate_order": "item"}, format="json")

    assert response.status_code == 400 and "already has judgments" in response.json()["candidate_order"][0]
    assert Study.objects.get(pk=study.pk).candidate_order == "annotator"


def test_the_staff_form_sets_the_order_keys_and_auto_advance_and_shows_clashes_under_the_field():
    collection = make_relic_collection(4)
    run = make_neighbour_run(collection)
    staff = Client()
    staff.force_login(make_user(staff=True))
    form = {
        "name": "form study",
        "collection": collection.pk,
        "negatives_run": run.pk,
        "items": 3,
        "candidates": 3,
        "judgments_per_item": 3,
        "seed": 0,
        "context_left": 4,
        "context_right": 4,
        "claim_minutes": 30,
        "candidate_order": "annotator",
        "option_keys": "jkl",
        "skip_key": "s",
        "flag_key": "s",
        "unsure_key": "u",
        "undo_key": "z",
        "mark_key": "m",
        "auto_advance": "on",
    }

    page = staff.get("/studies/new/").content.decode()
    clash = staff.post("/studies/new/", form).content.decode()
    left_behind = Study.objects.filter(name="form study").exists()
    created = staff.post("/studies/new/", {**form, "flag_key": "r"})

    assert "Annotation page" in page and 'name="option_keys"' in page and 'value="1234567890abcdefghij"' in page
    assert "&#x27;s&#x27; is also the skip key" in clash.split('id="id_flag_key"')[1].split("</div>")[0]
    assert not left_behind
    assert created.status_code == 302
    study = Study.objects.get(name="form study")
    assert (study.candidate_order, study.keyboard, study.auto_advance) == ("annotator", {"options": "jkl"}, True)


@pytest.mark.parametrize(("method", "body"), [("get", None), ("patch", {"keyboard": {"skip": "x"}})])
def test_annotators_and_anonymous_callers_cannot_read_or_set_presentation(method, body):
    study = make_relic_proxy_study(1)
    for client in (api_client(make_annotator()), api_client()):
        response = getattr(client, method)(presentation_url(study), body, format="json")
        assert response.status_code in (401, 403)
    assert Study.objects.get(pk=study.pk).keyboard == {}


# --- what annotators get --------------------------------------------------------------------------


def test_a_shuffled_order_says_nothing_about_the_gold():
    """The order comes from (seed, item, annotator) alone: moving the gold to another candidate
    changes nothing an annotator is shown, and the payload numbers places, not item positions."""
    study = apply_presentation(make_relic_proxy_study(6, candidates=4), candidate_order="annotator")
    annotator = make_annotator()
    client = api_client(annotator)
    before = client.get(next_url(study)).json()
    item = before["item"]
    gold = ItemCandidate.objects.get(item_id=item, is_gold=True)
    other = ItemCandidate.objects.filter(item_id=item).exclude(pk=gold.pk).first()
    ItemCandidate.objects.filter(pk=gold.pk).update(is_gold=False)
    ItemCandidate.objects.filter(pk=other.pk).update(is_gold=True)

    after = client.get(next_url(study)).json()

    assert before == after
    assert [c["position"] for c in after["candidates"]] == [0, 1, 2, 3]
    assert set(after["candidates"][0]) == {"id", "position", "title", "text"}
    forbidden = {"shown_order", "is_gold", "gold", "source_run", "source_rank", "sources", "order"}
    assert not forbidden & set(after)
    assert after["keys"] == DEFAULT_KEYS and after["auto_advance"] is False
    # Over every item and several annotators the gold lands on every place shown.
    places = set()
    for reader in [annotator, *(make_annotator() for _ in range(3))]:
        for item_id in study.items.values_list("pk", flat=True):
            position = ItemCandidate.objects.get(item_id=item_id, is_gold=True).position
            places.add(annotator_order(study.seed, item_id, reader.pk, 4).index(position))
    assert places == {0, 1, 2, 3}


def test_the_page_numbers_candidates_as_shown_and_carries_the_keys_but_no_order():
    study = apply_presentation(
        make_relic_proxy_study(2, candidates=3),
        candidate_order="annotator",
        keyboard={"options": "jkl", "skip": "x"},
        auto_advance=True,
    )
    annotator = make_annotator()
    browser = Client()
    browser.force_login(annotator)

    page = browser.get(f"/annotate/{study.pk}/").content.decode()

    item = int(page.split('name="item" value="')[1].split('"')[0])
    order = annotator_order(study.seed, item, annotator.pk, 3)
    by_position = dict(ItemCandidate.objects.filter(item_id=item).values_list("position", "passage__text"))
    texts = [by_position[position] for position in order]
    assert [page.index(text) for text in texts] == sorted(page.index(text) for text in texts)
    for place in range(3):
        assert f'name="choice" value="{place}" data-key="{"jkl"[place]}"' in page
    keys = json.loads(page.split('<script id="annotate-keys" type="application/json">')[1].split("</script>")[0])
    assert keys == {**DEFAULT_KEYS, "options": "jkl", "skip": "x"}
    assert 'data-auto-advance="true"' in page and "shown_order" not in page and "is_gold" not in page
    # Posting the place shown stores that candidate.
    browser.post(f"/annotate/{study.pk}/", {"item": item, "choice": 2})
    judgment = Judgment.objects.get(annotator=annotator)
    assert judgment.choice.position == order[2] and judgment.shown_order == order


def test_exports_carry_the_order_shown_and_imports_read_it_back(tmp_path):
    from django.core.management import call_command

    study = apply_presentation(make_relic_proxy_study(2, candidates=3), candidate_order="annotator")
    annotator = make_annotator("exported")
    client = api_client(annotator)
    while (item := client.get(next_url(study)).json()["item"]) is not None:
        client.post(submit_url(study), {"item": item, "position": 0}, format="json")
    staff = api_client(make_user(staff=True))
    rows = json.loads(response_text(staff.get(f"/api/judgments/?study={study.pk}&format=json")))

    copy = make_relic_proxy_study(2, candidates=3, collection=study.collection, run=study.negatives_run, seed=7)
    candidates = {row["item"]: row["candidates"] for row in export_study(study)}
    copies = {row["query"]: row["item"] for row in export_study(copy)}
    queries = {row["item"]: row["query"] for row in export_study(study)}
    lines = [{**row, "item": copies[queries[row["item"]]]} for row in rows]
    call_command("import_judgments", str(copy.pk), str(write_jsonl(tmp_path / "rows.jsonl", lines)), "--json")
    broken = write_jsonl(tmp_path / "broken.jsonl", [{**lines[0], "shown_order": [0, 0, 1]}])
    with pytest.raises(Exception) as refused:
        call_command("import_judgments", str(copy.pk), str(broken))

    for row in rows:
        stored = Judgment.objects.get(pk=row["judgment"])
        assert row["shown_order"] == stored.shown_order == annotator_order(study.seed, row["item"], annotator.pk, 3)
        assert candidates[row["item"]][row["shown_order"][0]] == row["choice"]  # the first shown was chosen
    imported = Judgment.objects.filter(item__study=copy).order_by("item__position")
    assert [j.shown_order for j in imported] == [row["shown_order"] for row in sorted(rows, key=lambda r: r["item"])]
    assert "broken.jsonl:1" in str(refused.value) and "shown_order" in str(refused.value)
