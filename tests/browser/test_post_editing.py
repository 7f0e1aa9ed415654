"""Post-editing in a real Chromium: a relevance study (0-3) where a judge (a real OpenAI-compatible
server process answering "SCORE: 2") proposes a label on one of two items. The page shows "a
suggested label", pre-selected; one annotator keeps it with Enter, another changes it with a key.
The judgments record both; staff's report shows both conditions; the annotator's page and API
carry the proposal and nothing else about it (no judge, no endpoint, no other answer)."""

import pytest
from playwright.sync_api import expect

from annotation.models import Judgment
from jobs.management.commands.run_platform import stop_process
from judges.post_editing import enable_post_editing
from judges.services import register_judge
from tests.browser.conftest import sign_in
from tests.factories import make_annotator, make_label_study, make_user
from tests.judges.conftest import start_chat_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

JUDGE = "hidden-proposer-7"


@pytest.fixture
def judge(settings, tmp_path):
    settings.MARGINALIA_OUTBOUND_ALLOW = ["127.0.0.1"]
    server = start_chat_server(tmp_path, "--answer", "SCORE: 2")
    yield register_judge(JUDGE, "openai", {"base_url": server.base_url, "model": "secret-model-x", "retries": 0})
    stop_process(server.process)


def answer_both_items(page, study, *, change_to: str | None) -> None:
    """Answer both items: where a label is suggested keep it (Enter) or press `change_to`
    first; elsewhere press 1."""
    for done in ("1 / 2", "2 / 2"):
        note = page.locator("#proposal")
        if note.count():
            expect(note).to_have_text("A suggested label is pre-selected. Keep it, or choose another answer.")
            expect(page.locator("input[name=label][value='2']")).to_be_checked()
            if change_to is not None:
                page.keyboard.press(change_to)
                expect(page.locator(f"input[name=label][value='{change_to}']")).to_be_checked()
        else:
            expect(page.locator("input[name=label]:checked")).to_have_count(0)
            page.keyboard.press("1")
        body = page.content()
        assert JUDGE not in body and "secret-model-x" not in body and "127.0.0.1" not in body
        page.keyboard.press("Enter")
        expect(page.locator("#progress-text")).to_have_text(done)


def test_one_annotator_keeps_the_proposal_another_changes_it_and_the_report_shows_both_conditions(page, judge):
    study = make_label_study(items=2, judgments_per_item=2, label_schema={"scale": "graded-0-3"})
    summary = enable_post_editing(study, judge, share=0.5, seed=4)
    assert summary["proposals"] == 1
    keeper, changer = make_annotator("keeper"), make_annotator("changer")

    sign_in(page, "keeper")
    page.goto(f"/annotate/{study.pk}/")
    api = page.request.get(f"/api/annotate/{study.pk}/next/").text()
    assert '"proposal"' in api and JUDGE not in api and "secret-model" not in api and '"judge"' not in api
    answer_both_items(page, study, change_to=None)
    page.context.clear_cookies()
    sign_in(page, "changer")
    page.goto(f"/annotate/{study.pk}/")
    answer_both_items(page, study, change_to="0")

    shown = Judgment.objects.filter(proposal_shown=True)
    assert sorted((j.annotator.username, j.label, j.proposal_kept) for j in shown) == [
        ("changer", 0, False),
        ("keeper", 2, True),
    ]
    assert all(j.proposal_kept is None for j in Judgment.objects.filter(proposal_shown=False))
    assert {j.annotator for j in Judgment.objects.all()} == {keeper, changer}

    page.context.clear_cookies()
    sign_in(page, make_user("lead", staff=True).username)
    page.goto(f"/studies/{study.pk}/report/")
    table = page.locator("#post-editing-conditions")
    expect(table.locator("tr[data-condition=shown]")).to_contain_text("Proposal shown")
    expect(table.locator("tr[data-condition=shown] td").nth(3)).to_have_text("1 (0.500)")
    expect(table.locator("tr[data-condition=not_shown]")).to_contain_text("No proposal")
    expect(table.locator("tr[data-condition=not_shown] td").nth(1)).to_have_text("2")
    expect(page.locator("#post-editing")).to_contain_text(JUDGE)  # staff may see who proposed
