"""The run page's coverage: Judged@5 and @10 under the qrels source staff choose (the collection's
own by default, a relevance study's labels), the warning below the threshold, Judged@10 per query,
a bad source answered with its reason; the figures are evaluate_run's. Under the collection's own
qrels the page reads the summary a finished run stores and its page's queries' hits: the same
figures as computing them over every hit."""

import re

import pytest

from annotation.models import Item
from retrieval.metrics import evaluate_run, run_coverage, run_page_coverage
from retrieval.models import Run
from retrieval.services.external_runs import save_ranked_run
from tests.factories import (
    add_label_judgment,
    add_qrels,
    create_pooled_study,
    make_annotator,
    make_collection,
    make_text_passages,
    make_text_query,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def pooled_and_unpooled():
    """Two runs over a judged pool of 3 queries x 6 passages; a study pooled from the first run's
    top 2 and judged by one annotator; the second run ranks the study's pairs last."""
    collection = make_collection("coverage")
    passages = make_text_passages(collection, [f"passage {i}" for i in range(6)])
    queries = [make_text_query(collection, f"query {i}", f"q{i}") for i in range(3)]
    for index, query in enumerate(queries):
        add_qrels(query, {passage: int(number == index) for number, passage in enumerate(passages)})
    pooled = save_ranked_run(
        collection,
        name="pooled",
        retriever="pooled",
        rankings={query: [(passage, 6.0 - i) for i, passage in enumerate(passages)] for query in queries},
    )
    unpooled = save_ranked_run(
        collection,
        name="unpooled",
        retriever="unpooled",
        rankings={query: [(passage, float(i)) for i, passage in enumerate(passages)] for query in queries},
    )
    study = create_pooled_study(collection, [pooled.pk], depth=2, judgments_per_item=1)
    reader = make_annotator("reader")
    for item in Item.objects.filter(study_id=study).prefetch_related("candidates"):
        add_label_judgment(item, reader, int(item.candidates.get().passage == passages[queries.index(item.query)]))
    return pooled, unpooled, study


def coverage_cells(html: str) -> dict[str, list[str]]:
    table = re.search(r'<table class="compact metrics" id="coverage-table">(.*?)</table>', html, re.S).group(1)
    return {
        depth: [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for depth, row in re.findall(r'<tr data-judged="(\w+)">(.*?)</tr>', table, re.S)
    }


def test_the_collections_own_qrels_judge_every_pool_passage_so_no_warning(pooled_and_unpooled, staff_client):
    _, unpooled, _ = pooled_and_unpooled
    html = staff_client.get(f"/runs/{unpooled.pk}/").content.decode()
    assert coverage_cells(html)["10"][:2] == ["10", "1.000"] and "coverage-warning" not in html
    assert html.count('<td class="num judged">1.00</td>') == 3


def test_a_run_the_study_did_not_pool_is_warned_under_the_studys_labels(pooled_and_unpooled, staff_client):
    pooled, unpooled, study = pooled_and_unpooled
    report = evaluate_run(unpooled, "Judged@5 Judged@10", qrels=f"study:{study}", per_query=True)
    html = staff_client.get(f"/runs/{unpooled.pk}/?qrels=study:{study}&coverage_threshold=0.5").content.decode()

    cells = coverage_cells(html)
    assert cells["5"][1] == f"{report['judged']['5']:.3f}" == "0.200"
    assert cells["10"][1] == f"{report['judged']['10']:.3f}" == "0.333"  # its top 6 hold the 2 judged of 6
    assert cells["10"][3] == "3"  # every query below the threshold
    assert f"under study:{study}, below 0.50" in html and 'class="warning coverage-warning"' in html
    assert html.count('<td class="num judged">0.33</td>') == 3
    pooled_page = staff_client.get(f"/runs/{pooled.pk}/?qrels=study:{study}&coverage_threshold=0.5").content.decode()
    assert coverage_cells(pooled_page)["5"][1] == "0.400" and "coverage-warning" in pooled_page


def test_a_bad_source_or_threshold_is_answered_with_its_reason(pooled_and_unpooled, staff_client):
    pooled, _, _ = pooled_and_unpooled
    bad = staff_client.get(f"/runs/{pooled.pk}/?qrels=study:999999")
    assert bad.status_code == 400 and "Qrels: no study with id 999999." in bad.content.decode()
    bad = staff_client.get(f"/runs/{pooled.pk}/?coverage_threshold=2")
    assert bad.status_code == 400 and "must be a share between 0 and 1" in bad.content.decode()


def test_the_stored_coverage_summary_gives_the_figures_of_reading_every_hit_at_any_threshold():
    """Imported qrels judging some passages non-relevant and leaving others unjudged, a query
    without qrels: the run's stored summary and one page's hits give run_coverage's figures."""
    collection = make_collection("stored-coverage")
    passages = make_text_passages(collection, [f"passage {i}" for i in range(12)])
    queries = [make_text_query(collection, f"query {i}", f"q{i}") for i in range(5)]
    for index, query in enumerate(queries[:4]):
        add_qrels(query, {passage: int(number == index) for number, passage in enumerate(passages[: 3 * index + 1])})
    rankings = {query: [(passage, float(i)) for i, passage in enumerate(passages)] for query in queries}
    run = Run.objects.get(pk=save_ranked_run(collection, name="stored", retriever="stored", rankings=rankings).pk)

    assert run.metrics["page_coverage"]["queries"] == 4
    for threshold in (None, "0", "0.3", "0.55", "1"):
        full = run_coverage(run, threshold=threshold)
        for page in (queries, queries[1:4], queries[4:]):
            stored = run_page_coverage(run, page, threshold=threshold)
            judged = {query.external_id for query in page} - {"q4"}  # q4 has no qrels
            per_query = {key: shares for key, shares in full["judged_per_query"].items() if key in judged}
            assert stored == {**full, "judged_per_query": per_query}
    assert run_coverage(run, threshold="0.55")["coverage"]["warning"].startswith("Judged@5 = 0.")
