"""Qrels from any source in one shape: the collection's own, a relevance study's aggregated labels
(exactly export_qrels' lines) and a judge's labels on the collection's relevance studies (exactly
export_qrels --source judge, the newest study winning a pair asked twice); the sources a
collection offers; refusals naming the field `qrels`."""

from io import StringIO

import pytest
from django.core.management import call_command

from judges.models import JudgeAnswer
from judges.prompts import item_prompt
from judges.services import register_judge
from retrieval.errors import InputError
from retrieval.qrels_sources import load_qrels, qrels_choices
from retrieval.selectors import trec_qrels_lines
from tests.factories import (
    add_label_item,
    add_label_judgment,
    add_qrels,
    make_annotator,
    make_collection,
    make_label_study,
    make_relic_proxy_study,
    make_text_passages,
    make_text_query,
)

pytestmark = pytest.mark.django_db


def exported(study_id: int, *options) -> list[str]:
    out = StringIO()
    call_command("export_qrels", str(study_id), *options, stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture(autouse=True)
def local_model_server_allowed(settings):
    """The judges here are registered at a local address, as a deployment that lists its model
    server in MARGINALIA_OUTBOUND_ALLOW does; nothing here asks them."""
    settings.MARGINALIA_OUTBOUND_ALLOW = ["127.0.0.1"]


@pytest.fixture
def two_studies():
    """Two binary relevance studies on one collection: the second asks again about one pair of
    the first; two annotators and a judge answer both."""
    collection = make_collection("sources")
    passages = make_text_passages(collection, ["a", "b", "c"])
    queries = [make_text_query(collection, f"query {i}", f"q{i}") for i in range(2)]
    add_qrels(queries[0], {passages[0]: 1, passages[1]: 0})
    first = make_label_study(collection, label_schema={"scale": "binary"}, name="first")
    second = make_label_study(collection, label_schema={"scale": "binary"}, name="second")
    pairs = {first: [(0, 0), (0, 1), (1, 2)], second: [(0, 1)]}
    judge = register_judge("gpt", "openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    annotators = [make_annotator("ann"), make_annotator("bea")]
    for study, study_pairs in pairs.items():
        for number, (query, passage) in enumerate(study_pairs):
            item = add_label_item(study, query=queries[query], passages=[passages[passage]])
            for annotator, label in zip(annotators, (1, number % 2), strict=True):
                add_label_judgment(item, annotator, label)
            judge_label = 1 if study is second else number % 2
            JudgeAnswer.objects.create(
                judge=judge, item=item, prompt_hash=item_prompt(item).hash, parsed={"label": judge_label}
            )
    return collection, first, second


def test_the_collections_own_qrels_are_its_qrels_file(two_studies):
    collection, _, _ = two_studies
    qrels = load_qrels(collection)
    assert qrels.source == "imported" and qrels.exact_ranks and qrels.has_non_relevant
    assert list(qrels.trec_lines()) == [line.strip() for line in trec_qrels_lines(collection)]


def test_a_studys_qrels_are_its_export(two_studies):
    collection, first, _ = two_studies
    for aggregate in ("", ":mean", ":median"):
        qrels = load_qrels(collection, f"study:{first.pk}{aggregate}")
        options = ("--aggregate", aggregate[1:]) if aggregate else ()
        assert sorted(qrels.trec_lines()) == sorted(exported(first.pk, *options)), aggregate
        assert qrels.source == f"study:{first.pk}{aggregate}" and qrels.origin == first and not qrels.exact_ranks


def test_a_judges_qrels_are_its_labels_on_every_relevance_study_the_newest_winning(two_studies):
    collection, first, second = two_studies
    qrels = load_qrels(collection, "judge:gpt")
    from_first = exported(first.pk, "--source", "judge", "--judge", "gpt")
    from_second = exported(second.pk, "--source", "judge", "--judge", "gpt")
    assert from_first == ["q0 0 d0 0", "q0 0 d1 1", "q1 0 d2 0"] and from_second == ["q0 0 d1 1"]
    assert sorted(qrels.trec_lines()) == sorted({**dict.fromkeys(from_first), **dict.fromkeys(from_second)})
    assert qrels.source == "judge:gpt" and qrels.label == "judge gpt (version 1)"


def test_a_collection_offers_its_qrels_its_relevance_studies_and_its_judges(two_studies):
    collection, first, second = two_studies
    assert qrels_choices(collection) == [
        ("imported", "the collection's qrels"),
        (f"study:{first.pk}", f"study {first.pk}: first"),
        (f"study:{second.pk}", f"study {second.pk}: second"),
        ("judge:gpt", "judge gpt"),
    ]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("study:x", "study:x does not name a study id"),
        ("study:999999", "no study with id 999999"),
        ("judge:nobody", "no judge named 'nobody'"),
        ("study", "unknown qrels source 'study'"),
        ("judges:gpt", "unknown qrels source 'judges:gpt'"),
    ],
)
def test_bad_sources_are_refused_on_the_qrels_field(two_studies, source, message):
    collection, _, _ = two_studies
    with pytest.raises(InputError) as error:
        load_qrels(collection, source)
    assert error.value.field == "qrels" and error.value.message.startswith(message)


def test_studies_of_another_collection_or_kind_and_silent_judges_are_refused(two_studies):
    collection, first, _ = two_studies
    with pytest.raises(InputError, match=f"study {first.pk} is not on collection elsewhere"):
        load_qrels(make_collection("elsewhere"), f"study:{first.pk}")
    proxy = make_relic_proxy_study(2)
    with pytest.raises(InputError, match="is a proxy study; qrels come from relevance studies") as error:
        load_qrels(proxy.collection, f"study:{proxy.pk}")
    assert error.value.field == "qrels"
    with pytest.raises(InputError, match="unknown aggregate 'mode'") as error:
        load_qrels(collection, f"study:{first.pk}:mode")
    assert error.value.field == "qrels"
    register_judge("quiet", "openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    with pytest.raises(InputError, match="judge 'quiet' has no labels on collection sources"):
        load_qrels(collection, "judge:quiet")
