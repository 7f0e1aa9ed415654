"""The staff study page: the text annotators read (not query ids), answers with rationales and
marked excerpts, per-annotator progress, exports as links, a relevance study's question, scale
and source runs, closing, reopening and deleting; annotators reach none of it."""

import re
import statistics

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import AnnotatorFlag, Assignment, Item, ItemFlag, Judgment, Study, StudyGrant
from annotation.services import claim_next_item, next_work
from annotation.services.lifecycle import close_study
from annotation.templatetags.annotation_flags import FLAGS_SHOWN
from console.selectors import ITEMS_PER_PAGE
from tests.factories import (
    add_judgment,
    add_label_judgment,
    make_annotator,
    make_bulk_proxy_study,
    make_plot_relevance_study,
    make_relic_proxy_study,
)

pytestmark = pytest.mark.django_db


def cells(html: str, annotator: str) -> list[str]:
    row = re.search(rf'<tr data-annotator="{annotator}">(.*?)</tr>', html, re.S).group(1)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_items_show_their_text_and_answers_their_rationales_and_marked_excerpts(staff_client):
    study = make_plot_relevance_study(label_schema={"scale": "graded-0-2", "spans": "passage", "rationale": "optional"})
    item = study.items.order_by("position").first()
    passage_text = item.candidates.get().passage.text
    add_label_judgment(
        item,
        make_annotator("ada"),
        2,
        spans=[{"target": "passage", "start": 0, "end": 9}],
        rationale="It names the very plot.",
    )

    html = staff_client.get(reverse("study_detail", args=[study.pk])).content.decode()

    assert f'<div class="item-text">{item.query.text}</div>' in html
    assert "“It names the very plot.”" in html
    assert f'<mark class="excerpt">{passage_text[:9]}</mark>' in html
    assert "2 · " in html  # the label with its name


def test_a_relevance_study_shows_its_question_scale_and_source_runs(staff_client):
    study = make_plot_relevance_study(label_schema={"scale": "graded-0-2", "question": "Does it fit?"})
    run_id = study.parameters["runs"][0]

    html = staff_client.get(reverse("study_detail", args=[study.pk])).content.decode()

    assert '<dd class="question">Does it fit?</dd>' in html
    assert re.search(r'<dd class="scale">graded-0-2: <span class="scale-value">0 · [^<]+</span>', html)
    assert f'<a href="/runs/{run_id}/">run {run_id}</a>' in html
    assert f'href="/api/studies/{study.pk}/qrels/?aggregate=majority"' in html


def test_exports_are_links(staff_client):
    study = make_relic_proxy_study(2)
    html = staff_client.get(reverse("study_detail", args=[study.pk])).content.decode()
    for export in ("json", "csv", "jsonl"):
        assert f'href="/api/judgments/?study={study.pk}&amp;format={export}"' in html
        assert staff_client.get(f"/api/judgments/?study={study.pk}&format={export}").status_code == 200
    assert "qrels" not in html.lower().split('id="exports"')[1].split("</section>")[0]  # proxy: no qrels


def test_per_annotator_progress_done_remaining_median_seconds_flags_last_active(staff_client):
    study = make_relic_proxy_study(4, judgments_per_item=2)
    ada, bob = make_annotator("ada"), make_annotator("bob")
    items = list(study.items.order_by("position"))
    for item, seconds in zip(items[:3], (4.0, 10.0, 7.0)):
        judgment = add_judgment(item, ada, 0)
        Judgment.objects.filter(pk=judgment.pk).update(seconds=seconds)
    add_judgment(items[0], bob, 1)  # item 0 is now complete (2 of 2)
    AnnotatorFlag.objects.create(study=study, annotator=ada, reason=AnnotatorFlag.Reason.TOO_FAST, value=1, threshold=2)
    claim_next_item(study, make_annotator("cyd"))

    html = staff_client.get(reverse("study_detail", args=[study.pk])).content.decode()

    last = Judgment.objects.filter(annotator=ada).latest("submitted_at").submitted_at
    assert cells(html, "ada") == [
        "ada",
        "3",
        "1",
        f"{statistics.median([4.0, 10.0, 7.0]):.1f}",
        "1",
        last.strftime("%Y-%m-%d %H:%M"),
    ]
    assert cells(html, "bob")[:5] == ["bob", "1", "3", "–", "0"]
    assert cells(html, "cyd")[:3] == ["cyd", "0", "3"]


def test_remaining_stops_at_the_cap_or_the_persons_own_quota_as_their_progress_does(staff_client):
    """A lab annotator one item short of the cap has one left, not every open item; a crowd
    participant who finished their quota has none (the study page said 17 and 12 in the first
    week's scenario); a voided judgment still counts against the limit, as the queue counts it."""
    study = make_relic_proxy_study(8, judgments_per_item=3)
    Study.objects.filter(pk=study.pk).update(max_items_per_annotator=4)
    lab, crowd, free = make_annotator("lab"), make_annotator("crowd"), make_annotator("free")
    StudyGrant.objects.create(study=study, annotator=crowd, item_quota=2)
    items = list(study.items.order_by("position"))
    for item in items[:3]:
        add_judgment(item, lab, 0)
    Judgment.objects.filter(annotator=lab, item=items[0]).update(voided=True)
    for item in items[:2]:
        add_judgment(item, crowd, 0)
    add_judgment(items[0], free, 0)

    html = staff_client.get(reverse("study_detail", args=[study.pk])).content.decode()

    assert cells(html, "lab")[1:3] == ["2", "1"]  # 3 of the cap of 4 worked, one voided
    assert cells(html, "crowd")[1:3] == ["2", "0"]
    assert cells(html, "free")[1:3] == ["1", "3"]  # the cap of 4 less 1 done, not the 7 open items left
    assert next_work(study, crowd)["item"] is None and next_work(study, lab)["item"] is not None


def test_staff_close_reopen_and_delete_a_study(staff_client):
    study = make_relic_proxy_study(2, name="short-lived")
    annotator = make_annotator("ada")
    claim_next_item(study, annotator)

    closed = staff_client.post(reverse("study_close", args=[study.pk]), follow=True).content.decode()
    study.refresh_from_db()
    assert study.status == Study.Status.CLOSED and "is closed" in closed
    assert not Assignment.objects.filter(item__study=study, state=Assignment.State.ACTIVE).exists()
    assert next_work(study, annotator)["item"] is None  # a closed study gives no work

    staff_client.post(reverse("study_reopen", args=[study.pk]))
    study.refresh_from_db()
    assert study.status == Study.Status.OPEN

    refused = staff_client.post(reverse("study_delete", args=[study.pk]), {"confirm": "short"}, follow=True)
    assert "Not deleted: type the study&#x27;s name" in refused.content.decode()
    deleted = staff_client.post(reverse("study_delete", args=[study.pk]), {"confirm": "short-lived"}, follow=True)
    assert "Study “short-lived” deleted with 2 items and 0 judgments." in deleted.content.decode()
    assert not Study.objects.filter(pk=study.pk).exists() and not Item.objects.exists()


def test_closing_keeps_the_judgments(db):
    study = make_relic_proxy_study(2)
    add_judgment(study.items.first(), make_annotator(), 0)
    close_study(study)
    assert Judgment.objects.filter(item__study=study).count() == 1


@pytest.mark.parametrize(
    "method, name",
    [("get", "study_detail"), ("post", "study_close"), ("post", "study_reopen"), ("post", "study_delete")],
)
def test_annotators_and_visitors_reach_no_study_page_or_control(client, method, name):
    study = make_relic_proxy_study(2, name="private")
    ada, eve = make_annotator("ada"), make_annotator("eve")
    answer = add_judgment(study.items.first(), ada, 1)
    url = reverse(name, args=[study.pk])
    data = {"confirm": "private"}
    anonymous = getattr(client, method)(url, data)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    client.force_login(eve)  # another annotator: must not see ada's answer
    response = getattr(client, method)(url, data)
    assert response.status_code == 403
    assert "ada" not in response.content.decode()
    study.refresh_from_db()
    assert study.status == Study.Status.OPEN and Judgment.objects.filter(pk=answer.pk).exists()


def test_items_come_a_page_at_a_time_with_a_pager(staff_client):
    study = make_bulk_proxy_study(ITEMS_PER_PAGE + 7)
    url = reverse("study_detail", args=[study.pk])

    first = staff_client.get(url).content.decode()
    last = staff_client.get(url + "?page=2").content.decode()

    assert first.count('<tr id="item-') == ITEMS_PER_PAGE
    assert last.count('<tr id="item-') == 7
    assert f"items 1–{ITEMS_PER_PAGE} of {ITEMS_PER_PAGE + 7}, page 1 of 2" in first
    assert '<a href="?page=2#items">next →</a>' in first
    assert f"items {ITEMS_PER_PAGE + 1}–{ITEMS_PER_PAGE + 7} of {ITEMS_PER_PAGE + 7}" in last


def test_the_page_asks_the_same_number_of_queries_whatever_the_size_of_the_study(staff_client):
    """Annotator progress is counted in the database and items are read a page at a time, so a
    100K-item study's page neither lists every item nor loops over every judgment."""

    def queries_for(items: int) -> int:
        study = make_bulk_proxy_study(items)
        with CaptureQueriesContext(connection) as captured:
            assert staff_client.get(reverse("study_detail", args=[study.pk])).status_code == 200
        return len(captured)

    assert queries_for(2 * ITEMS_PER_PAGE) == queries_for(6 * ITEMS_PER_PAGE)


def test_the_flags_table_lists_the_first_flags_and_links_to_every_flagged_item(staff_client):
    """A large study may hold thousands of item flags: the page lists the first FLAGS_SHOWN in item
    order and sends staff to the data manager's flagged items for the rest."""
    study = make_bulk_proxy_study(FLAGS_SHOWN + 3)
    reader = make_annotator("reader")
    items = list(study.items.order_by("position"))
    for item in reversed(items):  # raised last item first: the table still reads in item order
        ItemFlag.objects.create(item=item, annotator=reader, reason=f"broken {item.position}")
    html = staff_client.get(reverse("study_detail", args=[study.pk])).content.decode()
    table = html[html.index('id="item-flags"') :]
    listed = re.findall(r"broken (\d+)", table)
    assert listed == [str(position) for position in range(FLAGS_SHOWN)]
    data_url = reverse("data_study_items", args=[study.pk]) + "?flagged=yes"
    assert f"The first {FLAGS_SHOWN} of {FLAGS_SHOWN + 3} flags" in table and f'href="{data_url}"' in table

    few = make_bulk_proxy_study(2)
    ItemFlag.objects.create(item=few.items.first(), annotator=reader, reason="only one")
    html = staff_client.get(reverse("study_detail", args=[few.pk])).content.decode()
    assert "only one" in html and "flags, in item order" not in html
