"""The readers behind the staff exports that read a whole study or collection (the aggregate and
soft-label routes, the collection bundle) read columns, not row objects: judgments as the
database driver returns them, crowd-kit's frame a column at a time, queries and qrels as
values. Each is held here to what reading the same rows one object at a time gives, on
factory-built studies with the cases that change what counts: voided judgments, an annotator
excluded by a block, a judgment without an answer, submissions at the same instant and out of id
order, multi-select items whose one judgment rates every paragraph."""

import json
import zipfile
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from annotation.models import Judgment
from annotation.provenance import counted_answers
from annotation.selectors import counted_judgments
from annotation.services.quality import block_annotator
from evaluation import bulk
from evaluation.bundles import bundle_archive
from evaluation.label_aggregation import soft_label_rows
from evaluation.label_models import columns_frame, ratings_frame
from evaluation.ratings import study_ratings
from retrieval.qrels_sources import load_qrels
from retrieval.scoring import query_text
from tests.factories import (
    add_judgment,
    add_label_judgment,
    add_qrels,
    api_client,
    make_annotator,
    make_label_study,
    make_proxy_study,
    make_relic_collection,
    make_speech_quotability_study,
    make_user,
)

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def submitted(judgments: list[Judgment], seconds: list[float]) -> None:
    """Set each judgment's submission time, `seconds` after START (equal values: the same instant)."""
    for judgment, offset in zip(judgments, seconds, strict=True):
        Judgment.objects.filter(pk=judgment.pk).update(submitted_at=START + timedelta(seconds=offset))


def ratings_one_by_one(study) -> list[tuple]:
    """(judgment id, time, unit key, annotator, label) per rating from the counted judgments as
    objects, in submission order (time, then id): a proxy judgment with its choice's position, a
    label judgment with its label, a multi-select judgment once per paragraph of its item."""
    multi_select = bool((study.label_schema or {}).get("multi_select"))
    judgments = sorted(
        counted_judgments(study).select_related("choice", "annotator"), key=lambda j: (j.submitted_at, j.pk)
    )
    rows = []
    for judgment in judgments:
        at = np.datetime64(judgment.submitted_at.replace(tzinfo=None), "us")
        name = judgment.annotator.username
        if study.kind == "proxy":
            if judgment.choice is not None:
                rows.append((judgment.pk, at, judgment.item_id, name, judgment.choice.position))
        elif multi_select:
            for position in judgment.item.candidates.order_by("position").values_list("position", flat=True):
                rows.append(
                    (judgment.pk, at, f"{judgment.item_id}:{position}", name, int(position in judgment.selections))
                )
        elif judgment.label is not None:
            rows.append((judgment.pk, at, judgment.item_id, name, int(judgment.label)))
    return rows


def ratings_rows(study) -> list[tuple]:
    ratings = study_ratings(study)
    for column in (ratings.unit, ratings.annotator, ratings.label, ratings.judgment):
        assert column.dtype == np.int64
    assert ratings.submitted_at.dtype == np.dtype("datetime64[us]")
    assert list(ratings.annotators) == sorted(ratings.annotators)
    return [
        (judgment, at, ratings.units[unit].key, ratings.annotators[annotator], label)
        for judgment, at, unit, annotator, label in zip(
            ratings.judgment.tolist(),
            ratings.submitted_at,
            ratings.unit.tolist(),
            ratings.annotator.tolist(),
            ratings.label.tolist(),
            strict=True,
        )
    ]


def same_answers_as_counted_answers(study) -> bool:
    """The answers read with the ratings (unanswered judgments as None) are counted_answers', in
    whatever order the database gave each item's."""
    counted = {item: Counter(values) for item, values in study_ratings(study).answers.items()}
    return counted == {item: Counter(values) for item, values in counted_answers(study).items()}


def test_a_proxy_studys_ratings_read_in_columns_are_its_counted_choices_in_submission_order():
    study = make_proxy_study(gold_positions=[0, 2, 1, 1])
    people = [make_annotator(name) for name in ("zoe", "ann", "bea", "spoiler")]
    judgments = [
        add_judgment(item, person, (item.position + offset) % 3)
        for item in study.items.order_by("position")
        for offset, person in enumerate(people)
    ]
    # Later ids submitted earlier, pairs at the same instant (ordered by id), fractions of a second.
    submitted(judgments, [100 - index // 2 + 0.25 * (index % 3 == 0) for index in range(len(judgments))])
    Judgment.objects.filter(pk=judgments[1].pk).update(voided=True)
    block_annotator(study, people[3], by=make_user("boss", staff=True), reason="spoiler", exclude_judgments=True)
    unanswered = study.items.get(position=3)
    Judgment.objects.create(item=unanswered, annotator=make_annotator("undecided"), source=Judgment.Source.IMPORT)

    expected = ratings_one_by_one(study)
    assert len(expected) == 4 * 3 - 1  # the blocked annotator's, the voided and the unanswered left out
    assert ratings_rows(study) == expected
    assert None in counted_answers(study)[unanswered.pk] and same_answers_as_counted_answers(study)


def test_label_and_multi_select_ratings_read_in_columns_are_their_labels_in_submission_order():
    study = make_label_study(items=3, label_schema={"scale": "graded-0-2"})
    people = [make_annotator(name) for name in ("cal", "ann", "bea")]
    judgments = [
        add_label_judgment(item, person, None if (item.position, index) == (1, 2) else (item.position + index) % 3)
        for item in study.items.order_by("position")
        for index, person in enumerate(people)
    ]
    submitted(judgments, [5, 5, 3, 9, 1, 1, 7, 2, 2])
    assert ratings_rows(study) == ratings_one_by_one(study)
    assert same_answers_as_counted_answers(study)

    pilot = make_speech_quotability_study(multi_select=True)
    item = pilot.items.get()
    chosen = {"eve": [0, 2], "dan": [], "fay": [1], "gus": [0, 1, 2]}
    judgments = [
        add_label_judgment(item, make_annotator(name), selections=positions) for name, positions in chosen.items()
    ]
    submitted(judgments, [4, 4, 1, 2])
    expected = ratings_one_by_one(pilot)
    assert len(expected) == len(chosen) * item.candidates.count()
    assert ratings_rows(pilot) == expected
    assert same_answers_as_counted_answers(pilot)


@pytest.mark.parametrize(
    "triples",
    [
        [],
        [("bea", 7, 1), ("ann", 7, 0), ("ann", 3, 2)],
        [("bea", "7:1", 1), ("ann", "7:0", 0), ("ann", "3:2", 1)],
    ],
    ids=["none", "item keys", "paragraph keys"],
)
def test_crowd_kits_frame_built_a_column_at_a_time_equals_the_one_built_from_triples(triples):
    workers, tasks, labels = ([triple[index] for triple in triples] for index in range(3))
    pd.testing.assert_frame_equal(columns_frame(workers, tasks, labels), ratings_frame(triples), check_exact=True)
    with pytest.raises(ValueError, match="annotator 'ann' labelled task 3 twice"):
        columns_frame(["ann", "ann"], [3, 3], [0, 1])


def test_the_soft_label_export_streams_one_json_dumps_line_per_row_across_chunks(monkeypatch):
    monkeypatch.setattr(bulk, "LINES_PER_CHUNK", 2)  # five items: chunks of 2, 2 and 1 lines
    study = make_label_study(items=5, label_schema={"scale": "graded-0-2"})
    people = [make_annotator(name) for name in ("ann", "bea", "cal")]
    for item in study.items.order_by("position"):
        for index, person in enumerate(people):
            add_label_judgment(item, person, (item.position * index) % 3)
    client = api_client(make_user("staff-reader", staff=True))
    response = client.get(f"/api/studies/{study.pk}/soft-labels/?method=dawid-skene")
    assert response.status_code == 200
    chunks = [chunk.decode() for chunk in response.streaming_content]
    expected = [json.dumps(row, ensure_ascii=False) + "\n" for row in soft_label_rows(study, "dawid-skene")]
    assert len(chunks) == 3 and "".join(chunks) == "".join(expected)


def test_one_encoder_for_many_lines_writes_what_json_dumps_writes_even_after_a_refusal():
    encode = bulk.line_encoder()
    circular: list = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        encode(circular)
    record = {"labels": [1, 2], "when": datetime(2026, 3, 1)}
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode(record)
    del record["when"]
    assert encode(record) == '{"labels": [1, 2]}'  # refused once, encoded when fixed
    values = [
        {"_id": "p1", "title": "", "text": 'tab\there, «quotes» and "escapes"\n', "none": None},
        {7: {"0": 0.1, "1": 1e300, "2": float("nan")}, "labels": [[0, 2], [], True, False]},
        "a bare string",
        [],
        {},
        circular[:0],
    ]
    assert [encode(value) for value in values] == [json.dumps(value, ensure_ascii=False) for value in values]
    assert "".join(bulk.json_lines(values[:2])) == "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values[:2])


def test_a_multi_select_items_soft_label_row_counts_each_judgment_once():
    pilot = make_speech_quotability_study(multi_select=True)
    item = pilot.items.get()
    for name, positions in {"ann": [0], "bea": [0, 1], "cal": []}.items():
        add_label_judgment(item, make_annotator(name), selections=positions)
    (row,) = soft_label_rows(pilot, "majority")
    assert row["item"] == item.pk and row["judgments"] == 3


def test_the_bundles_query_texts_and_qrels_are_the_queries_own_read_as_values(tmp_path):
    collection = make_relic_collection(4)
    queries = list(collection.queries.order_by("ordinal", "pk"))
    passages = list(collection.passages.order_by("ordinal", "pk"))
    add_qrels(queries[0], {passages[7]: 0, passages[3]: 1})  # read back in passage order
    with zipfile.ZipFile(bundle_archive(collection, load_qrels(collection))) as archive:
        files = {name.split("/", 1)[1]: archive.read(name).decode() for name in archive.namelist()}
    texts = {
        query.external_id: query_text(query, len(query.left_context), len(query.right_context), None)
        for query in queries
    }
    assert all(query.has_context for query in queries)
    beir = [json.loads(line) for line in files["queries.jsonl"].splitlines()]
    assert [(record["_id"], record["text"]) for record in beir] == list(texts.items())
    assert files["trec/queries.tsv"].splitlines() == [f"{query}\t{text}" for query, text in texts.items()]
    expected = [
        f"{qrel.query.external_id} 0 {qrel.passage.external_id} {qrel.relevance}"
        for query in queries
        for qrel in query.qrels.select_related("query", "passage").order_by("passage__ordinal")
    ]
    assert files["trec/qrels"].splitlines() == expected
    assert list(load_qrels(collection).trec_lines()) == expected
