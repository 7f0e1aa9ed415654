"""A test collection in a real Chromium: a relevance study pooled from two runs (`create_study
--runs A,B --depth K`) is partly judged by two annotators on the annotation page; staff then see
the coverage warning on the page of a run the pool never included, rank three runs under the
study's labels on the collection's leaderboard (with leave-one-run-out) and download the table
as CSV and LaTeX."""

import csv
import io
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import Item
from retrieval.models import Qrel
from retrieval.services.external_runs import save_ranked_run
from tests.browser.conftest import sign_in
from tests.factories import (
    add_qrels,
    call_json_command,
    create_pooled_study,
    make_annotator,
    make_collection,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSAGES = [
    "The lighthouse keeper counts ships at dawn and writes their names.",
    "Salt ledgers record every barrel of herring sold at the harbour.",
    "A storm drowns the harbour lamps one by one before midnight.",
    "The keeper's daughter reads the salt ledger aloud to the clerks.",
    "Herring boats return before the storm breaks over the bay.",
    "Dawn light on the harbour walls wakes the gulls.",
    "The clerk hides a second ledger under the floorboards.",
    "Gulls follow the herring boats into the bay.",
]
QUERIES = {
    "q-ships": ("keeper counts ships at dawn", {0: 1, 5: 0, 3: 0}),
    "q-ledger": ("secret salt ledger of the clerk", {6: 1, 1: 1, 3: 0}),
    "q-storm": ("storm over the harbour lamps", {2: 1, 4: 0, 5: 0}),
}
JUDGED_EACH = 4


def collection_with_three_runs():
    collection = make_collection("harbour tales")
    passages = make_text_passages(collection, PASSAGES)
    queries = []
    for external_id, (text, grades) in QUERIES.items():
        query = make_text_query(collection, text, external_id)
        add_qrels(query, {passages[index]: grade for index, grade in grades.items()})
        queries.append(query)
    bm25 = call_json_command("retrieve", "--collection", collection.name, "--retriever", "bm25", "--depth", "8")[
        "run_id"
    ]
    reverse = save_ranked_run(
        collection,
        name="reverse order",
        retriever="reverse",
        rankings={query: [(passage, float(i)) for i, passage in enumerate(passages)] for query in queries},
    )
    # A system the pool never saw: it ranks the passages the two pooled runs put last first.
    newcomer = save_ranked_run(
        collection,
        name="newcomer",
        retriever="newcomer",
        rankings={query: [(passage, float((i * 5) % 8)) for i, passage in enumerate(passages)] for query in queries},
    )
    return collection, [bm25, reverse.pk, newcomer.pk]


def judge_in_the_browser(page, study_id: int, username: str) -> None:
    """An annotator answers JUDGED_EACH items the way the qrels would, by keyboard."""
    sign_in(page, username)
    page.goto(f"/annotate/{study_id}/")
    for done in range(JUDGED_EACH):
        expect(page.locator("#progress-text")).to_contain_text(f"{done} /")
        item = Item.objects.get(pk=int(page.locator("#judgment-form input[name=item]").input_value()))
        passage = item.candidates.get().passage
        grade = Qrel.objects.filter(query=item.query, passage=passage).values_list("relevance", flat=True).first()
        page.keyboard.press("1" if grade else "0")
        page.keyboard.press("Enter")
    expect(page.locator("#progress-text")).to_contain_text(f"{JUDGED_EACH} /")
    page.context.clear_cookies()


def test_judge_a_pool_then_see_coverage_rank_runs_and_download_the_table(page):
    collection, (bm25, reverse, newcomer) = collection_with_three_runs()
    study_id = create_pooled_study(collection, [bm25, reverse], depth=2, name="harbour pool")
    for name in ("reader-a", "reader-b"):
        make_annotator(name)
        judge_in_the_browser(page, study_id, name)
    make_user("organiser", staff=True)
    sign_in(page, "organiser")

    # The run the pool never included is warned about under the study's labels.
    page.goto(f"/runs/{newcomer}/")
    page.select_option("#coverage-qrels", f"study:{study_id}")
    page.click("#coverage-form button")
    expect(page.locator(".coverage-warning")).to_contain_text(f"under study:{study_id}")
    expect(page.locator("#coverage-table [data-judged='10']")).to_be_visible()

    # The collection's leaderboard under the same labels, with leave-one-run-out.
    page.goto(f"/collections/{collection.pk}/")
    page.click("text=Leaderboard")
    for run_id in (bm25, reverse, newcomer):
        page.check(f"input[name=runs][value='{run_id}']")
    page.select_option("#qrels", f"study:{study_id}")
    page.fill("#metrics", "nDCG@10 P@5 Bpref")
    page.fill("#leave_one_out", "2")
    page.click("#leaderboard-options button")
    expect(page.locator("#leaderboard-table tbody tr")).to_have_count(3)
    expect(page.locator("#kendall-tau")).to_contain_text("nDCG@10")
    expect(page.locator(f"#leaderboard-table tr[data-run='{newcomer}']")).to_contain_text("low coverage")

    with page.expect_download() as csv_download:
        page.click("#download-csv")
    rows = list(csv.reader(io.StringIO(Path(csv_download.value.path()).read_text(encoding="utf-8"))))
    assert rows[0][:4] == ["rank", "run", "name", "nDCG@10"] and len(rows) == 4
    assert {int(row[1]) for row in rows[1:]} == {bm25, reverse, newcomer}
    assert csv_download.value.suggested_filename == "leaderboard-harbour-tales.csv"

    with page.expect_download() as latex_download:
        page.click("#download-latex")
    latex = Path(latex_download.value.path()).read_text(encoding="utf-8")
    assert latex.startswith(r"\begin{table}") and "newcomer" in latex and r"\bottomrule" in latex
    assert latex_download.value.suggested_filename == "leaderboard-harbour-tales.tex"
