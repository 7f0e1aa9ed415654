"""A judge's card in a real Chromium: another lab's qrels imported twice as the labels of one
judge (two files, so two versions), a card computed for each with two runs, and the judge's staff
page showing both versions' cards side by side and the current version's card in full (κ with
people, the leaderboard's τ, unreadable answers); an annotator gets 403 and sees none of it."""

import pytest
from playwright.sync_api import expect

from judges.models import Judge
from tests.browser.conftest import sign_in
from tests.factories import (
    add_qrels,
    call_json_command,
    make_annotator,
    make_collection,
    make_scored_run,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def carded_judge(tmp_path):
    """Two queries of three passages (the first relevant to people), two runs, and the judge
    `other-lab` imported from two qrels files, each version with a card."""
    collection = make_collection("card-page")
    first, last = {}, {}
    for number in range(2):
        query = make_text_query(collection, f"What does tale {number} tell?", external_id=f"q{number}")
        passages = make_text_passages(collection, [f"tale {number} passage {index}" for index in range(3)])
        add_qrels(query, {passage: int(index == 0) for index, passage in enumerate(passages)})
        first[query] = {passage: 3 - index for index, passage in enumerate(passages)}
        last[query] = {passage: index for index, passage in enumerate(passages)}
    runs = ",".join(str(make_scored_run(collection, scores).pk) for scores in (first, last))
    for version, lines in enumerate([["q0 0 d0 1", "q0 0 d1 0", "q1 0 d3 1"], ["q0 0 d0 0", "q0 0 d1 1", "q1 0 d3 1"]]):
        path = tmp_path / f"other-lab-{version}.qrels"
        path.write_text("".join(f"{line}\n" for line in lines))
        call_json_command("import_judge_labels", "other-lab", path, "--collection", collection.name)
        call_json_command("judge_card", "other-lab", "--collection", "card-page", "--runs", runs, "--bootstrap", "9")
    return Judge.objects.get(name="other-lab", version=2)


def test_staff_read_every_versions_card_on_the_judges_page(page, carded_judge):
    sign_in(page, make_user("lead", staff=True).username)
    page.goto(f"/judges/{carded_judge.pk}/")

    expect(page.locator("h1")).to_have_text("Judge other-lab, version 2")
    rows = page.locator("#judge-cards table.card-comparison tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("v2")
    expect(rows.nth(0)).to_have_class("current")
    expect(rows.nth(1)).to_contain_text("v1")
    expect(page.locator("#judge-cards h3")).to_contain_text("Version 2 on card-page against")
    expect(page.locator("#judge-cards dd.unparseable")).to_have_text("0 of 3 (0.000)")
    expect(page.locator("#judge-cards dd.items")).to_contain_text("on 3 pairs")
    expect(page.locator("#judge-cards table.card-leaderboard tbody tr")).to_have_count(4)  # the leaderboard's metrics

    page.locator("a", has_text="v1").first.click()
    expect(page.locator("h1")).to_have_text("Judge other-lab, version 1")
    expect(page.locator("#judge-cards h3")).to_contain_text("Version 1")


def test_an_annotator_reaches_no_judge_page(page, carded_judge):
    make_annotator("reader")
    sign_in(page, "reader")
    response = page.goto(f"/judges/{carded_judge.pk}/")
    assert response.status == 403
    body = page.content()
    assert "other-lab" not in body and "judge-cards" not in body and "κ" not in body
