"""The judgment exports byte for byte: four small studies with fixed ids and times export exactly
the text in fixtures/judgment_export.{jsonl,csv,json}, which the export wrote when it still
built a model instance per row (issue 14 made it read rows with values_list), with the
`shown_order` column added since (issue 24 point 4), the item's label and its provenance
(`item_label`, `label_source`, `label_method`, `reworks`: issue 24 point 2), and `revision` and
`revised_at` (revisions, issue 21); no addition changed any other byte. Between them the studies
hold every kind of field: a chosen candidate right and wrong, a gold item, labels with spans,
rubric and a rationale that CSV must quote (comma, quotes, newline, non-ASCII), multi-select
answers matching their expected positions or not, no known answer (correct is null), a recorded
presentation order or none, missing and zero seconds, unsure, an imported, a voided and a revised
judgment, and no judgments at all."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from annotation.exports import JUDGMENT_FORMATS, judgment_export
from annotation.models import Item, ItemCandidate, Judgment, Study
from retrieval.models import Passage, Query
from tests.factories import make_annotator, make_collection

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent / "fixtures"
STARTED = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def fixed_studies() -> list[Study]:
    collection = make_collection("export-bytes")
    ann_a, ann_b, zoe = (make_annotator(name) for name in ("ann_a", "ann_b", "zoë"))
    queries = [
        Query.objects.create(collection=collection, external_id=f"q-{i}", text=f"query {i}", ordinal=i)
        for i in range(2)
    ]
    passages = [
        Passage.objects.create(collection=collection, external_id=f"p-{i}", text=f"passage {i}", ordinal=i)
        for i in range(4)
    ]

    def study(pk, kind):
        return Study.objects.create(pk=pk, name=f"export-bytes-{pk}", kind=kind, collection=collection)

    def item(pk, study, position, role=Item.Role.WORK, expected=None, gold_position=None, shown=2):
        made = Item.objects.create(
            pk=pk, study=study, query=queries[position], position=position, role=role, expected_label=expected
        )
        for index in range(shown):
            ItemCandidate.objects.create(
                pk=pk * 10 + index, item=made, passage=passages[index], position=index, is_gold=index == gold_position
            )
        return made

    def judgment(pk, item, annotator, minute, **fields):
        Judgment.objects.create(pk=pk, item=item, annotator=annotator, **fields)
        Judgment.objects.filter(pk=pk).update(submitted_at=STARTED + timedelta(minutes=minute, microseconds=pk))

    proxy = study(9100, Study.Kind.PROXY)
    work = item(9110, proxy, 0, gold_position=0)
    hidden = item(9111, proxy, 1, role=Item.Role.GOLD, gold_position=1)
    judgment(9130, work, ann_a, 5, choice_id=91100, seconds=12.5, server_seconds=13.25, shown_order=[1, 0])
    judgment(9131, work, ann_b, 1, choice_id=91101, unsure=True, source=Judgment.Source.IMPORT)
    judgment(9132, hidden, zoe, 2, choice_id=91110, seconds=0.0, voided=True, void_reason='spam, "copied"\nagain')

    relevance = study(9200, Study.Kind.RELEVANCE)
    graded = item(9210, relevance, 0, role=Item.Role.GOLD, expected=2, shown=1)
    open_item = item(9211, relevance, 1, shown=1)
    judgment(
        9230,
        graded,
        ann_a,
        3,
        label=2,
        # Keys in the order Postgres's jsonb keeps them (shortest first): the CSV export writes
        # stored objects' keys as the database returns them, so other orders differ by database.
        spans=[{"end": 4, "start": 0, "target": "passage"}],
        rubric={"clarity": 1, "novelty": 0},
        rationale='Same plot — "twist", mostly; naïve 🙂',
        seconds=7,
    )
    judgment(9231, graded, ann_b, 4, label=1, rubric={"clarity": 0, "novelty": 1})
    judgment(9232, open_item, zoe, 6, label=0, server_seconds=2.5)
    Judgment.objects.filter(pk=9232).update(revision=2, revised_at=STARTED + timedelta(minutes=7))

    quotability = study(9300, Study.Kind.QUOTABILITY)
    chosen = item(9310, quotability, 0, expected=[0, 2], shown=3)
    unknown = item(9311, quotability, 1, shown=1)
    judgment(9330, chosen, ann_a, 1, selections=[0, 2], shown_order=[2, 0, 1])
    judgment(9331, chosen, ann_b, 2, selections=[])
    judgment(9332, unknown, ann_a, 3, selections=[0])

    return [proxy, relevance, quotability, study(9400, Study.Kind.PROXY)]


@pytest.mark.parametrize("export_format", JUDGMENT_FORMATS)
def test_every_format_writes_the_bytes_it_always_wrote(export_format):
    written = "".join("".join(judgment_export(study, export_format)) for study in fixed_studies())

    assert written.encode() == (FIXTURES / f"judgment_export.{export_format}").read_bytes()
