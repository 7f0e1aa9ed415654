"""The judge card's inputs read a study's candidates once, not once per item: the study pool
(judges.pools.study_pool) and the position probe (judges.probes.position_probe) cost, besides the
prompts they build (judge_prompt reads each item as an annotator is shown it), the same few
statements for a study of two items as for one of six."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Item
from judges.pools import study_pool
from judges.probes import position_probe, turned_order
from judges.prompts import item_prompt
from judges.services import judge_prompt, judged_items, register_judge
from tests.factories import make_label_study, make_relic_proxy_study

pytestmark = pytest.mark.django_db


def statements(call) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as seen:
        result = call()
    return len(seen.captured_queries), result


def pool_statements(study, judge) -> int:
    """study_pool's statements less those of the prompts it builds, one per item."""
    spent, pool = statements(lambda: study_pool(study, judge))
    items = Item.objects.filter(study=study).select_related("study", "query").order_by("position")
    prompts, _ = statements(lambda: [judge_prompt(item, judge) for item in items])
    assert [pair.passage for pair in pool] == [item.candidates.order_by("position").first().passage for item in items]
    return spent - prompts


def probe_statements(study, judge) -> int:
    """position_probe's statements, every answer stored already, less those of its two prompts per item."""
    spent, probed = statements(lambda: position_probe(judge, study))
    items = judged_items(study)

    def prompts():
        for item in items:
            order = list(item.candidates.order_by("position").values_list("position", flat=True))
            judge_prompt(item, judge)
            item_prompt(item, judge.settings.get("prompt", ""), turned_order(order))

    prompted, _ = statements(prompts)
    order_reads = len(items)  # the reference's own per-item reads of the order, above
    assert [entry.candidates for entry in probed] == [item.candidates.count() for item in items]
    return spent - (prompted - order_reads)


def test_a_study_pool_reads_the_items_passages_in_one_statement(chat_server):
    server = chat_server("--answer", "SCORE: 1")
    judge = register_judge("pooler", "openai", {"base_url": server.base_url, "model": "m", "retries": 0})
    two = make_label_study(items=2, candidates=3, label_schema={"scale": "graded-0-3"})
    six = make_label_study(items=6, candidates=3, label_schema={"scale": "graded-0-3"})
    assert pool_statements(six, judge) == pool_statements(two, judge)


def test_the_position_probe_reads_the_items_orders_in_one_statement(chat_server):
    server = chat_server("--answer", "ANSWER: 1")
    judge = register_judge("prober", "openai", {"base_url": server.base_url, "model": "m", "retries": 0})
    two, six = make_relic_proxy_study(2), make_relic_proxy_study(6)
    for study in (two, six):
        position_probe(judge, study)  # asks the judge; the counted runs below find every answer stored
    assert probe_statements(six, judge) == probe_statements(two, judge)
