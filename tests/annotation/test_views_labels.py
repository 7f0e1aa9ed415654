"""The web pages of relevance and quotability studies and of quality control, through Django's
test client: label items without JavaScript, hidden gold that looks exactly like work, the
qualification round's pages, and the staff pages to create label studies, watch annotators'
quality, block them, adjudicate disagreements and let annotators review each other."""

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from annotation.models import Adjudication, Item, Judgment, PeerReview, QualificationAttempt, Study, StudyBlock
from annotation.services import claim_next_item, create_relevance_study, quality, submit_judgment
from annotation.services.quality import designate_items, sample_for_peer_review
from retrieval.models import Passage
from tests.factories import (
    PLOT_PASSAGES,
    add_pool,
    add_qrels,
    make_annotator,
    make_collection,
    make_plot_relevance_study,
    make_scored_run,
    make_speech_quotability_study,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = pytest.mark.django_db

RUBRIC = [{"name": "specificity", "values": [0, 1], "labels": {"0": "broad", "1": "specific"}}]
FULL_SCHEMA = {"scale": "graded-0-2", "spans": "passage", "rubric": RUBRIC, "rationale": "optional"}


def login(client, user):
    client.force_login(user)
    return client


def shown_item_id(response) -> int:
    return int(re.search(r'name="item" value="(\d+)"', response.content.decode()).group(1))


def judge(study, annotator, **answer) -> Judgment:
    """The annotator claims their next item and answers it through the services."""
    assignment = claim_next_item(study, annotator)
    return submit_judgment(annotator=annotator, item=assignment.item, **answer).judgment


# --- label items without JavaScript ----------------------------------------------------------------


def test_a_relevance_answer_with_spans_rubric_and_rationale_is_stored(client):
    annotator = make_annotator()
    study = make_plot_relevance_study(label_schema=FULL_SCHEMA)
    login(client, annotator)
    page = client.get(reverse("annotate", args=[study.pk]))
    html = page.content.decode()
    assert re.findall(r'name="label" value="(\d+)" data-key="(\w)"', html) == [("0", "0"), ("1", "1"), ("2", "2")]
    assert 'name="rubric-specificity" value="1" data-key="1"' in html and "specific" in html
    assert 'data-span-target="passage"' in html and 'name="rationale"' in html

    response = client.post(
        reverse("annotate", args=[study.pk]),
        {
            "item": shown_item_id(page),
            "label": "2",
            "rubric-specificity": "1",
            "rationale": "Line one.\r\nLine two.",
            "spans": '[{"target": "passage", "start": 0, "end": 5}]',
            "seconds": "4.5",
        },
    )
    assert response.status_code == 302
    judgment = Judgment.objects.get(annotator=annotator)
    assert (judgment.label, judgment.rubric, judgment.rationale, judgment.seconds) == (
        2,
        {"specificity": 1},
        "Line one.\nLine two.",
        4.5,
    )
    assert judgment.spans == [{"target": "passage", "start": 0, "end": 5}]


def test_an_answer_the_schema_does_not_allow_is_refused_naming_the_field(client):
    annotator = make_annotator()
    study = make_plot_relevance_study(label_schema=FULL_SCHEMA)
    login(client, annotator)
    item = shown_item_id(client.get(reverse("annotate", args=[study.pk])))
    response = client.post(
        reverse("annotate", args=[study.pk]), {"item": item, "label": "7", "rubric-specificity": "1"}, follow=True
    )
    assert "Your answer was not stored" in response.content.decode() and "label" in response.content.decode()
    assert shown_item_id(response) == item
    response = client.post(
        reverse("annotate", args=[study.pk]),
        {
            "item": item,
            "label": "1",
            "rubric-specificity": "1",
            "spans": '[{"target": "passage", "start": 3, "end": 999}]',
        },
        follow=True,
    )
    assert "spans[0]" in response.content.decode()
    assert not Judgment.objects.exists()


def test_spans_nested_100000_deep_are_refused_on_the_page_not_a_500(client):
    annotator = make_annotator()
    study = make_plot_relevance_study(label_schema=FULL_SCHEMA)
    login(client, annotator)
    item = shown_item_id(client.get(reverse("annotate", args=[study.pk])))
    answer = {"item": item, "label": "1", "rubric-specificity": "1", "spans": "[" * 100_000 + "]" * 100_000}

    response = client.post(reverse("annotate", args=[study.pk]), answer, follow=True)

    assert response.status_code == 200 and "could not be read" in response.content.decode()
    assert not Judgment.objects.exists()


def test_span_texts_keep_every_stored_character_even_carriage_returns(client):
    collection = make_collection()
    passage = make_text_passages(collection, ["First line.\r\nSecond <line> & more."])[0]
    query = make_text_query(collection, "A query.")
    run = make_scored_run(collection, {query: {passage: 1.0}})
    study = create_relevance_study(
        name="crlf", collection=collection, runs=[run], depth=1, label_schema={"spans": "passage"}
    ).study
    login(client, make_annotator())
    html = client.get(reverse("annotate", args=[study.pk])).content.decode()
    assert (
        'data-span-target="passage" data-span-noun="passage">First line.&#13;\nSecond &lt;line&gt; &amp; more.</div>'
        in html
    )


def test_the_quotability_pilot_posts_the_selected_paragraphs(client):
    annotator = make_annotator()
    study = make_speech_quotability_study(multi_select=True)
    login(client, annotator)
    page = client.get(reverse("annotate", args=[study.pk]))
    html = page.content.decode()
    assert re.findall(r'name="selections" value="(\d)" data-key="(\d)"', html) == [("0", "1"), ("1", "2"), ("2", "3")]
    assert "Harbour plan divides the council" in html
    client.post(reverse("annotate", args=[study.pk]), {"item": shown_item_id(page), "selections": ["2", "0"]})
    assert Judgment.objects.get(annotator=annotator).selections == [0, 2]


class MarkupShape(HTMLParser):
    """The tags and attributes of a page, without its text: what a gold item could give away."""

    # What legitimately differs between any two items: which item it is, and the form's token.
    VARYING = {("input", "item"), ("input", "csrfmiddlewaretoken")}

    def __init__(self):
        super().__init__()
        self.shape = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if (tag, attributes.get("name")) in self.VARYING:
            attributes["value"] = "*"
        if "data-item" in attributes:
            attributes["data-item"] = "*"
        self.shape.append((tag, tuple(sorted(attributes.items()))))

    def handle_endtag(self, tag):
        self.shape.append(("/" + tag, ()))


def markup_shape(html: str) -> list:
    parser = MarkupShape()
    parser.feed(html[html.index("<main ") : html.index("</main>")])
    return parser.shape


@pytest.mark.parametrize("schema", [FULL_SCHEMA, {"spans": "query", "rationale": "required"}])
def test_a_hidden_gold_item_renders_exactly_like_a_work_item(client, schema):
    study = make_plot_relevance_study(label_schema=schema, judgments_per_item=1)
    gold, work = study.items.order_by("position")[:2]
    designate_items(study, Item.Role.GOLD, items=[gold], expected={gold.pk: 1})
    pages = {}
    for item in (gold, work):
        login(client, make_annotator())
        response = client.get(reverse("annotate", args=[study.pk]))
        assert shown_item_id(response) == item.pk
        pages[item.pk] = response.content.decode()
    assert markup_shape(pages[gold.pk]) == markup_shape(pages[work.pk])
    assert not re.search(r"\b(gold|expected|qualification)\b", pages[gold.pk], re.IGNORECASE)


# --- the qualification round -----------------------------------------------------------------------


def qualification_study(*, attempts: int) -> Study:
    study = make_plot_relevance_study()
    Study.objects.filter(pk=study.pk).update(qualification_threshold=1.0, qualification_attempts=attempts)
    first = study.items.order_by("position").first()
    designate_items(study, Item.Role.QUALIFICATION, items=[first], expected={first.pk: 1})
    return study


def test_a_failed_attempt_with_retries_left_shows_the_result_and_a_try_again_button(client):
    study = qualification_study(attempts=2)
    login(client, make_annotator())
    page = client.get(reverse("annotate", args=[study.pk]))
    assert "Qualification round — attempt 1 of 2 · question 1 of 1" in page.content.decode()
    after = client.post(reverse("annotate", args=[study.pk]), {"item": shown_item_id(page), "label": "0"}, follow=True)
    html = after.content.decode()
    assert "You did not pass qualification attempt 1 (0 of 1 correct)." in html
    assert "attempt 1 of 2: not passed" in html and "You have 1 more attempt." in html
    assert f'action="{reverse("qualification_retry", args=[study.pk])}"' in html
    assert not Judgment.objects.exists()

    retried = client.post(reverse("qualification_retry", args=[study.pk]), follow=True)
    assert "Qualification round — attempt 2 of 2" in retried.content.decode()


def test_an_annotator_with_no_attempt_left_is_told_and_gets_no_work(client):
    study = qualification_study(attempts=1)
    login(client, make_annotator())
    page = client.get(reverse("annotate", args=[study.pk]))
    client.post(reverse("annotate", args=[study.pk]), {"item": shown_item_id(page), "label": "0"})
    refused = client.get(reverse("annotate", args=[study.pk]))
    assert refused.status_code == 403
    assert "you did not pass the qualification round: all 1 attempts used" in refused.content.decode()
    assert 'id="judgment-form"' not in refused.content.decode()
    assert QualificationAttempt.objects.get().passed is False


# --- staff: creating label studies -------------------------------------------------------------------


def plot_collection():
    collection = make_collection()
    passages = make_text_passages(collection, list(PLOT_PASSAGES))
    query = make_text_query(collection, "A detective destroys a letter.")
    add_qrels(query, {passages[0]: 1, passages[1]: 0})
    run = make_scored_run(collection, {query: {p: -i for i, p in enumerate(passages)}})
    return collection, run


def relevance_form_data(collection, run, **changes):
    return {
        "name": "Plots",
        "collection": collection.pk,
        "runs": [run.pk],
        "depth": 4,
        "judgments_per_item": 2,
        "seed": 1,
        "context_left": 4,
        "context_right": 4,
        "scale": "graded-0-2",
        "spans": "passage",
        "rationale": "optional",
        "claim_minutes": 30,
        "question": "",
        "rubric": "",
        **changes,
    }


def test_staff_create_a_relevance_study_with_rubric_and_quality_settings(client):
    collection, run = plot_collection()
    login(client, make_user(staff=True))
    response = client.post(
        reverse("study_create_kind", args=["relevance"]),
        relevance_form_data(
            collection,
            run,
            rubric='[{"name": "quality", "values": [0, 1, 2]}]',
            qualification_threshold="0.9",
            qualification_questions="1",
            qualification_attempts="3",
            gold_rate="0.25",
            peer_review_rate="0.1",
        ),
    )
    study = Study.objects.get(name="Plots")
    assert response.status_code == 302 and response.url == reverse("study_detail", args=[study.pk])
    assert study.kind == Study.Kind.RELEVANCE and study.items.count() == 4 and study.judgments_per_item == 2
    assert study.label_schema["scale"] == "graded-0-2" and study.label_schema["spans"] == "passage"
    assert [field["name"] for field in study.label_schema["rubric"]] == ["quality"]
    assert (study.qualification_threshold, study.qualification_attempts, study.gold_rate, study.peer_review_rate) == (
        0.9,
        3,
        0.25,
        0.1,
    )
    # The two items the qrels judge became the qualification question and the hidden gold item.
    roles = sorted(study.items.values_list("role", flat=True))
    assert roles == ["gold", "qualification", "work", "work"]


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"rubric": "[{"}, "rubric", "Not valid JSON"),
        ({"rubric": '[{"name": "quality"}]'}, "rubric", "rubric[0].values"),
        ({"runs": []}, "runs", "at least one run"),
        ({"qualification_threshold": "0.9", "qualification_questions": "5"}, "qualification_questions", "known answer"),
        ({"qualification_questions": "1"}, "qualification_threshold", "need a pass threshold"),
        ({"qualification_threshold": "0.9"}, "qualification_questions", "at least one question"),
    ],
)
def test_the_relevance_form_shows_each_error_under_its_field(client, changes, field, message):
    collection, run = plot_collection()
    login(client, make_user(staff=True))
    response = client.post(
        reverse("study_create_kind", args=["relevance"]), relevance_form_data(collection, run, **changes)
    )
    assert response.status_code == 200
    assert message in " ".join(response.context["form"].errors[field])
    assert not Study.objects.exists()


def test_staff_create_the_quotability_pilot_through_the_form(client):
    collection = make_collection()
    paragraphs = make_text_passages(collection, ["One.", "Two.", "Three."])
    query = make_text_query(collection, "", left_context=["The minister spoke."], metadata={"title": "Harbour"})
    add_pool(query, paragraphs)
    login(client, make_user(staff=True))
    response = client.post(
        reverse("study_create_kind", args=["quotability"]),
        {
            "name": "Pilot",
            "collection": collection.pk,
            "multi_select": "on",
            "selection": "top_non_gold",
            "depth": 1,
            "candidates_from": "pool",
            "judgments_per_item": 5,
            "seed": 0,
            "context_left": 4,
            "context_right": 0,
            "rationale": "none",
            "claim_minutes": 30,
            "question": "",
            "rubric": "",
            "spans": "",
        },
    )
    study = Study.objects.get(name="Pilot")
    assert response.status_code == 302
    assert study.label_schema["multi_select"] is True and study.judgments_per_item == 5
    assert study.items.get().candidates.count() == 3


@pytest.mark.parametrize("url_name", ["study_quality", "study_adjudicate"])
def test_annotators_cannot_open_the_quality_pages(client, url_name):
    study = make_plot_relevance_study()
    login(client, make_annotator())
    assert client.get(reverse(url_name, args=[study.pk])).status_code == 403
    assert client.get(reverse("study_create_kind", args=["relevance"])).status_code == 403


# --- staff: quality, blocking, adjudication ------------------------------------------------------------


def test_the_quality_page_reads_each_measure_once_for_its_flags_and_its_table(client, monkeypatch):
    """Looking refreshes the flags and shows the table from the same gold accuracy, speeds and
    peer pass rates (each a pass over every judgment)."""
    study = make_plot_relevance_study(judgments_per_item=1)
    gold = study.items.order_by("position").first()
    designate_items(study, Item.Role.GOLD, items=[gold], expected={gold.pk: 1})
    judge(study, make_annotator("careless"), label=0, seconds=3)
    calls = []
    for name in ("gold_accuracy", "speeds", "peer_pass_rates"):
        measure = getattr(quality, name)
        monkeypatch.setattr(
            quality, name, lambda study, measure=measure, name=name: calls.append(name) or measure(study)
        )
    login(client, make_user("organiser", staff=True))

    page = client.get(reverse("study_quality", args=[study.pk])).content.decode()

    assert sorted(calls) == ["gold_accuracy", "peer_pass_rates", "speeds"]
    assert '<td class="gold">0 % <span class="muted">(0/1)</span></td>' in page


def test_the_quality_page_lists_gold_accuracy_and_blocks_only_with_a_reason(client):
    study = make_plot_relevance_study(judgments_per_item=1)
    gold = study.items.order_by("position").first()
    designate_items(study, Item.Role.GOLD, items=[gold], expected={gold.pk: 1})
    careless = make_annotator("careless")
    judge(study, careless, label=0, seconds=3)  # the gold item, answered wrongly
    judge(study, careless, label=1, seconds=5)
    staff = make_user("organiser", staff=True)
    login(client, staff)
    page = client.get(reverse("study_quality", args=[study.pk])).content.decode()
    row = page[page.index('data-annotator="careless"') :]
    # Gold accuracy from the gold item; counted judgments and the median time from work alone.
    assert '<td class="gold">0 % <span class="muted">(0/1)</span></td>' in row
    assert "<td>1</td>" in row and "<td>5.0 s</td>" in row

    url = reverse("annotator_block", args=[study.pk])
    refused = client.post(url, {"annotator": "careless", "reason": " "}, follow=True)
    assert "a reason is required" in refused.content.decode()
    assert not StudyBlock.objects.exists()
    client.post(url, {"annotator": "careless", "reason": "wrong on gold", "exclude_judgments": "on"})
    block = StudyBlock.objects.get()
    assert (block.annotator, block.reason, block.exclude_judgments, block.created_by) == (
        careless,
        "wrong on gold",
        True,
        staff,
    )
    assert (
        "Blocked by organiser: wrong on gold" in client.get(reverse("study_quality", args=[study.pk])).content.decode()
    )
    client.post(reverse("annotator_unblock", args=[study.pk]), {"annotator": "careless"})
    assert not StudyBlock.objects.exists()


def test_staff_see_every_answer_of_a_disagreement_and_decide_it(client):
    study = make_plot_relevance_study(
        judgments_per_item=2, depth=1, n_queries=1, label_schema={"scale": "graded-0-2", "rationale": "optional"}
    )
    first = judge(study, make_annotator("ann"), label=0, rationale="Off topic.")
    judge(study, make_annotator("bob"), label=2)
    login(client, make_user("organiser", staff=True))
    queue = client.get(reverse("study_adjudicate", args=[study.pk])).content.decode()
    assert f'data-item="{first.item_id}"' in queue and "Undecided" in queue
    page = client.get(reverse("item_adjudicate", args=[study.pk, first.item_id])).content.decode()
    assert "<strong>0 · Not relevant</strong>" in page and "<strong>2 · Highly relevant</strong>" in page
    assert "ann</span>" in page and "bob</span>" in page and "Off topic." in page

    client.post(
        reverse("item_adjudicate", args=[study.pk, first.item_id]),
        {"label": "2", "reason": "Annotator error", "note": "bob is right"},
    )
    decision = Adjudication.objects.get(item_id=first.item_id)
    assert (decision.label, decision.reason, decision.note) == (2, "Annotator error", "bob is right")
    assert (
        "Decided: 2 · Highly relevant · Annotator error"
        in client.get(reverse("study_adjudicate", args=[study.pk])).content.decode()
    )


# --- peer review ------------------------------------------------------------------------------------


def test_a_reviewer_sees_the_item_and_the_answer_but_not_whose_and_passes_it(client):
    # One item, which both judge: a reviewer never sees an answer to an item they may still judge.
    study = make_plot_relevance_study(label_schema={"spans": "passage", "rationale": "optional"}, depth=1, n_queries=1)
    Study.objects.filter(pk=study.pk).update(peer_review_rate=1.0)
    author, reviewer = make_annotator("author"), make_annotator("reviewer")
    judged = judge(study, author, label=1, spans=[{"target": "passage", "start": 0, "end": 3}], rationale="Clear.")
    judge(study, reviewer, label=0)
    study.refresh_from_db()
    sample_for_peer_review(study)
    review = PeerReview.objects.get(reviewer=reviewer)
    assert review.judgment == judged

    login(client, reviewer)
    home = client.get(reverse("home")).content.decode()
    assert "Review 1 answer" in home
    page = client.get(reverse("peer_review", args=[study.pk])).content.decode()
    passage = Passage.objects.get(pk=judged.item.candidates.get().passage_id).text
    assert f'<mark class="span-mark">{passage[:3]}</mark>' in page
    assert "1 · Relevant" in page and "Clear." in page and 'data-key="p"' in page and 'data-key="f"' in page
    assert "author" not in page

    client.post(reverse("peer_review", args=[study.pk]), {"review": review.pk, "verdict": "pass", "comment": "ok"})
    review.refresh_from_db()
    assert (review.verdict, review.comment) == ("pass", "ok")
    assert "Nothing to review." in client.get(reverse("peer_review", args=[study.pk])).content.decode()
