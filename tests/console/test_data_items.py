"""The data manager's table of a study's items: each filter, sort, search, jump and the detail,
through REST and the page (both call console.data_selectors). One proxy study whose items are
in every state a filter tells apart."""

import pytest

from annotation.models import Item, ItemFlag, Judgment, JudgmentRevision, PeerReview, Study
from annotation.services import void_judgment
from annotation.services.quality import adjudicate
from judges.models import Judge, JudgeAnswer
from retrieval.models import Query
from tests.annotation.test_attacks import session_client
from tests.factories import (
    add_judgment,
    add_label_item,
    add_label_judgment,
    api_client,
    make_annotator,
    make_label_study,
    make_preference_study,
    make_proxy_study,
    make_user,
)

pytestmark = pytest.mark.django_db


class World:
    """Seven items of a proxy study (3 judgments per item), by position:
    0 unanimous and complete; 1 split, flagged; 2 all different, adjudicated; 3 one judgment,
    answered by the judge "smol"; 4 unjudged, only an unreadable answer of the judge "broken";
    5 two judgments, one voided; 6 two alike (unanimous but partial)."""

    def __init__(self):
        self.staff = make_user("curator", staff=True)
        self.study = make_proxy_study(gold_positions=[0, 1, 2, 0, 1, 2, 0], name="bulk-words")
        self.ann = [make_annotator(f"ann{n}") for n in range(3)]
        self.items = list(self.study.items.order_by("position"))
        answers = {0: [0, 0, 0], 1: [1, 1, 0], 2: [0, 1, 2], 3: [2], 5: [0, 1], 6: [None, 2, 2]}
        self.judgments = {}
        for position, chosen in answers.items():
            for annotator, choice in zip(self.ann, chosen):
                if choice is not None:
                    self.judgments[position, annotator.username] = add_judgment(self.items[position], annotator, choice)
        void_judgment(self.judgments[5, "ann1"], by=self.staff, reason="copied")
        ItemFlag.objects.create(item=self.items[1], annotator=self.ann[0], reason="two candidates alike")
        adjudicate(self.items[2], by=self.staff, position=2, note="the third")
        smol, broken = (Judge.objects.create(name=name, backend=Judge.Backend.RUN) for name in ("smol", "broken"))
        JudgeAnswer.objects.create(judge=smol, item=self.items[3], prompt_hash="h", parsed={"position": 2})
        JudgeAnswer.objects.create(judge=broken, item=self.items[4], prompt_hash="h", failure_reason="no number")

    def url(self, suffix: str = "items/") -> str:
        return f"/api/studies/{self.study.pk}/data/{suffix}"

    def positions(self, **params) -> list[int]:
        response = api_client(self.staff).get(self.url(), params)
        assert response.status_code == 200, response.json()
        return [row["position"] for row in response.json()["results"]]


@pytest.fixture
def world():
    return World()


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, [0, 1, 2, 3, 4, 5, 6]),
        ({"status": "unjudged"}, [4]),
        ({"status": "partial"}, [3, 5, 6]),
        ({"status": "complete"}, [0, 1, 2]),
        ({"agreement": "unanimous"}, [0, 6]),
        ({"agreement": "split"}, [1]),
        ({"agreement": "none"}, [2]),
        ({"flagged": "yes"}, [1]),
        ({"flagged": "no"}, [0, 2, 3, 4, 5, 6]),
        ({"annotator": "ann1"}, [0, 1, 2, 5, 6]),  # the voided judgment of item 5 is theirs too
        ({"annotator": "ann2"}, [0, 1, 2, 6]),
        ({"judge": "smol"}, [3]),
        ({"judge": "broken"}, []),  # an unreadable answer is no answer
        ({"adjudicated": "yes"}, [2]),
        ({"adjudicated": "no"}, [0, 1, 3, 4, 5, 6]),
        ({"status": "complete", "agreement": "unanimous"}, [0]),
        ({"status": "partial", "annotator": "ann0"}, [3, 5]),
    ],
)
def test_each_filter_keeps_exactly_the_items_in_that_state(world, params, expected):
    assert world.positions(**params) == expected


def test_roles_filter_hidden_gold_apart_from_work(world):
    Item.objects.filter(pk=world.items[4].pk).update(role=Item.Role.GOLD)
    assert world.positions(role="gold") == [4]
    assert world.positions(role="work") == [0, 1, 2, 3, 5, 6]


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("-position", [6, 5, 4, 3, 2, 1, 0]),
        ("judgments", [4, 3, 5, 6, 0, 1, 2]),  # live judgments, ties in study order
        ("-judgments", [0, 1, 2, 6, 3, 5, 4]),
    ],
)
def test_sorts_order_by_position_and_live_judgments(world, sort, expected):
    assert world.positions(sort=sort) == expected


def test_sorting_by_the_last_answer_puts_unjudged_items_last_both_ways(world):
    base = world.judgments[0, "ann0"].submitted_at
    for offset, position in enumerate([2, 0, 6, 1, 3, 5]):  # the order in which they were last answered
        Judgment.objects.filter(item=world.items[position]).update(submitted_at=base.replace(year=2020 + offset))
    assert world.positions(sort="answered") == [2, 0, 6, 1, 3, 5, 4]
    assert world.positions(sort="-answered") == [5, 3, 1, 6, 0, 2, 4]


def test_search_finds_items_by_query_external_id_and_text(world):
    query = world.items[3].query
    Query.objects.filter(pk=query.pk).update(external_id="wtb-417", text="A girl and a dragon on a glass hill")
    assert world.positions(search="WTB-417") == [3]
    assert world.positions(search="glass hill") == [3]
    assert world.positions(search="dragon", status="unjudged") == []
    assert world.positions(search="no such words") == []


def test_search_reads_context_sentences_with_non_ascii_words_on_every_database():
    staff = make_user(staff=True)
    study = make_label_study(items=2)
    Query.objects.filter(pk=study.items.get(position=1).query_id).update(
        text="", left_context=["Il entra au café, naïf."], right_context=["Puis il sortit."]
    )
    client = api_client(staff)
    for term in ("café, naïf", "sortit", "Il entra"):
        rows = client.get(f"/api/studies/{study.pk}/data/items/", {"search": term}).json()["results"]
        assert [row["position"] for row in rows] == [1], term


def test_pages_are_cut_by_the_server_and_count_every_match():
    staff = make_user(staff=True)
    study = make_proxy_study(gold_positions=[0] * 30)
    client = api_client(staff)
    first = client.get(f"/api/studies/{study.pk}/data/items/", {"per_page": 25}).json()
    second = client.get(f"/api/studies/{study.pk}/data/items/", {"per_page": 25, "page": 2}).json()
    assert (first["count"], first["pages"], len(first["results"])) == (30, 2, 25)
    assert [row["number"] for row in second["results"]] == list(range(26, 31))
    assert client.get(f"/api/studies/{study.pk}/data/items/", {"per_page": 7}).status_code == 400


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "done"}, "status"),
        ({"agreement": "most"}, "agreement"),
        ({"flagged": "maybe"}, "flagged"),
        ({"annotator": "nobody-here"}, "annotator"),
        ({"judge": "gpt-99"}, "judge"),
        ({"sort": "random"}, "sort"),
        ({"page": "٣"}, "page"),
        ({"search": "x" * 201}, "search"),
        ({"search": "nul\x00"}, "search"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it_and_the_page_says_why(world, params, field):
    response = api_client(world.staff).get(world.url(), params)
    assert response.status_code == 400 and field in response.json()
    page = session_client(world.staff).get(f"/studies/{world.study.pk}/data/", params)
    assert page.status_code == 400 and f"field &#x27;{field}&#x27;" in page.content.decode()


def test_rows_carry_answers_agreement_flags_adjudication_and_gold(world):
    rows = api_client(world.staff).get(world.url()).json()["results"]
    split, disputed, voided = rows[1], rows[2], rows[5]
    assert [answer["answer"] for answer in split["answers"]] == ["option 2", "option 2", "option 1"]
    assert (split["agreement"], split["flags"], split["gold_position"]) == ("split", 1, 1)
    assert (disputed["agreement"], disputed["adjudicated"]) == ("none", True)
    assert (voided["judgments"], voided["voided"], voided["agreement"]) == (1, 1, None)
    assert [answer["voided"] for answer in voided["answers"]] == [False, True]


def test_jump_opens_an_item_by_position_or_id(world):
    client = api_client(world.staff)
    assert client.get(world.url("jump/"), {"jump": 3}).json() == {
        "item": world.items[2].pk,
        "position": 2,
        "number": 3,
    }
    assert client.get(world.url("jump/"), {"jump": world.items[5].pk, "jump_by": "item"}).json()["number"] == 6
    for params in ({"jump": 99}, {"jump": 0}, {"jump": "x"}, {"jump": 1, "jump_by": "name"}, {}):
        response = client.get(world.url("jump/"), params)
        assert response.status_code == 400, params
    browser = session_client(world.staff)
    opened = browser.get(f"/studies/{world.study.pk}/data/jump/", {"jump": 2})
    assert opened["Location"] == f"/studies/{world.study.pk}/data/items/{world.items[1].pk}/"
    missed = browser.get(f"/studies/{world.study.pk}/data/jump/", {"jump": 42}, follow=True)
    assert "this study has no item at position 42" in missed.content.decode()


def test_the_detail_shows_every_answer_with_seconds_rationale_spans_and_history():
    staff, ann, reviewer = make_user(staff=True), make_annotator("ada"), make_annotator("rev")
    study = make_label_study(items=1, label_schema={"rationale": "optional", "spans": "passage"})
    item = study.items.get()
    passage_text = item.candidates.get().passage.text
    judgment = add_label_judgment(
        item, ann, 1, spans=[{"target": "passage", "start": 0, "end": 7}], rationale="Same plot.", seconds=12.5
    )
    JudgmentRevision.objects.create(
        judgment=judgment, number=1, label=0, rationale="Different.", answered_at=judgment.submitted_at
    )
    Judgment.objects.filter(pk=judgment.pk).update(revision=2, revised_at=judgment.submitted_at)
    PeerReview.objects.create(judgment=judgment, reviewer=reviewer, verdict="pass", comment="fine")
    detail = api_client(staff).get(f"/api/studies/{study.pk}/data/items/{item.pk}/").json()
    entry = detail["judgments"][0]
    assert (entry["annotator"], entry["label"], entry["seconds"], entry["rationale"]) == ("ada", 1, 12.5, "Same plot.")
    assert entry["spans"] == [{"target": "passage", "start": 0, "end": 7, "text": passage_text[:7]}]
    assert entry["revision"] == 2 and entry["earlier_answers"][0]["rationale"] == "Different."
    assert entry["peer_reviews"] == [{"reviewer": "rev", "verdict": "pass", "comment": "fine", "reviewed_at": None}]
    page = session_client(staff).get(f"/studies/{study.pk}/data/items/{item.pk}/").content.decode()
    assert "Same plot." in page and "12.5" in page and passage_text[:7] in page and "Different." in page


def test_the_detail_shows_the_void_the_flags_the_adjudication_and_the_judges(world):
    detail = api_client(world.staff).get(world.url(f"items/{world.items[5].pk}/")).json()
    voided = next(entry for entry in detail["judgments"] if entry["voided"])
    assert (voided["annotator"], voided["void_reason"], voided["voided_by"]) == ("ann1", "copied", "curator")
    assert detail["previous"] == world.items[4].pk and detail["next"] == world.items[6].pk
    flagged = api_client(world.staff).get(world.url(f"items/{world.items[1].pk}/")).json()
    assert flagged["flags"][0]["reason"] == "two candidates alike" and flagged["gold_position"] == 1
    decided = api_client(world.staff).get(world.url(f"items/{world.items[2].pk}/")).json()
    assert decided["adjudication"]["answer"] == "option 3" and decided["adjudication"]["note"] == "the third"
    judged = api_client(world.staff).get(world.url(f"items/{world.items[3].pk}/")).json()
    assert judged["judge_answers"] == [
        {"judge": "smol", "version": 1, "sample": 0, "answer": "option 3", "failure_reason": ""}
    ]
    other_study = make_proxy_study(gold_positions=[0])
    assert api_client(world.staff).get(world.url(f"items/{other_study.items.get().pk}/")).status_code == 404


def test_the_table_page_lists_the_filtered_rows_with_their_links(world):
    page = session_client(world.staff).get(f"/studies/{world.study.pk}/data/", {"agreement": "split"})
    html = page.content.decode()
    assert page.status_code == 200 and "1 item matching the filter" in html
    assert f"/studies/{world.study.pk}/data/items/{world.items[1].pk}/" in html
    assert f'data-item="{world.items[0].pk}"' not in html
    # The filters ride along with the bulk form, so "all matching" acts on what is shown.
    assert '<input type="hidden" name="agreement" value="split">' in html


def test_the_revision_setting_is_off_by_default_and_staff_turn_it_on_and_off(world):
    assert world.study.allow_revisions is False
    client, setting = api_client(world.staff), f"/api/studies/{world.study.pk}/answer-revisions/"
    assert client.get(setting).json()["allow_revisions"] is False
    assert client.put(setting, {"allow_revisions": True}, format="json").json() == {
        "study": world.study.pk,
        "allow_revisions": True,
    }
    assert Study.objects.get(pk=world.study.pk).allow_revisions is True
    assert client.put(setting, {"allow_revisions": "yes"}, format="json").status_code == 400
    session_client(world.staff).post(f"/studies/{world.study.pk}/data/revisions/", {})
    assert Study.objects.get(pk=world.study.pk).allow_revisions is False


def test_label_study_agreement_compares_labels_and_selections():
    staff = make_user(staff=True)
    study = make_label_study(items=0)
    alike, differ = add_label_item(study), add_label_item(study)
    people = [make_annotator() for _ in range(2)]
    for person in people:
        add_label_judgment(alike, person, 1)
    add_label_judgment(differ, people[0], 0)
    add_label_judgment(differ, people[1], 1)
    client = api_client(staff)
    rows = client.get(f"/api/studies/{study.pk}/data/items/", {"agreement": "unanimous"}).json()["results"]
    assert [row["item"] for row in rows] == [alike.pk]
    multi = make_label_study(kind=Study.Kind.QUOTABILITY, items=0, candidates=3, label_schema={"multi_select": True})
    same, other = add_label_item(multi, candidates=3), add_label_item(multi, candidates=3)
    for person in people:
        add_label_judgment(same, person, selections=[0, 2])
    add_label_judgment(other, people[0], selections=[0])
    add_label_judgment(other, people[1], selections=[0, 1])
    rows = client.get(f"/api/studies/{multi.pk}/data/items/", {"agreement": "none"}).json()["results"]
    assert [row["item"] for row in rows] == [other.pk]


def test_a_preference_studys_items_are_listed_without_an_agreement_which_its_report_gives():
    study = make_preference_study()
    client = api_client(make_user("curator", staff=True))
    rows = client.get(f"/api/studies/{study.pk}/data/items/").json()["results"]
    assert rows and all(row["agreement"] is None for row in rows)
    refused = client.get(f"/api/studies/{study.pk}/data/items/", {"agreement": "split"})
    assert refused.status_code == 400 and "preference report" in refused.json()["agreement"][0]
    detail = client.get(f"/api/studies/{study.pk}/data/items/{rows[0]['item']}/")
    assert detail.status_code == 200 and detail.json()["agreement"] is None
