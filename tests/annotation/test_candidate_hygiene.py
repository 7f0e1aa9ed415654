"""Candidate hygiene: a proxy item never shows a near-copy of its gold or two near-copies of one
negative; each negative passed over is replaced by the next one of the run and counted in the
study's parameters, which the study page, the REST study detail and the creation summary show."""

from difflib import SequenceMatcher
from itertools import combinations

import pytest

from annotation.services import create_proxy_study
from annotation.services.candidate_hygiene import near_duplicates, shared_share, text_print
from retrieval.errors import InputError
from retrieval.models import Collection, Run
from tests.factories import (
    add_hits,
    add_qrels,
    api_client,
    call_json_command,
    make_collection,
    make_run,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = pytest.mark.django_db

GOLD = (
    "The ledger lay open on the counting-house desk, its columns of salt prices climbing page after page "
    "while the clerk slept beside the cold stove"
)
# The gold with its punctuation and one word changed: no sentence of either appears whole in the other.
GOLD_EDITED = (
    "the ledger lay open on the counting house desk -- its columns of salt prices climbing page after page, "
    "while the old clerk slept beside the cold stove"
)
FIRST = "A storm broke over the harbour and the fishing boats ran for the shelter of the long stone mole"
FIRST_COPY = "A storm broke over the harbour, and the fishing boats ran for the shelter of the long stone mole!"
SECOND = "Nobody in the village remembered who had planted the row of pear trees along the churchyard wall"
THIRD = "The schoolmaster counted the children twice before he let them cross the frozen river in single file"


def test_an_edited_copy_and_a_contained_text_are_near_duplicates_and_unrelated_texts_are_not():
    assert near_duplicates(text_print(GOLD), text_print(GOLD_EDITED))
    assert near_duplicates(text_print(FIRST), text_print(f"{SECOND} {FIRST} {THIRD}"))  # the whole of it, inside
    assert not near_duplicates(text_print(FIRST), text_print(SECOND))
    assert shared_share(text_print(FIRST), text_print(FIRST_COPY)) == 1.0
    assert shared_share(text_print(""), text_print(FIRST)) == 0.0


def test_two_windows_sharing_less_than_half_are_distinct_unless_they_share_a_sentence():
    words = [f"w{index}" for index in range(40)]
    window = text_print(" ".join(words[:20]))  # 16 shingles
    assert not near_duplicates(window, text_print(" ".join(words[12:32])))  # 4 of 16 shared, a run of 8 words
    assert near_duplicates(window, text_print(" ".join(words[6:26])))  # 10 of 16 shared
    long_window = text_print(" ".join(words[:30]))  # 26 shingles
    assert near_duplicates(long_window, text_print(" ".join(words[20:40])))  # 6 of 26, but a 10-word run


@pytest.fixture
def beir_item():
    """One BEIR query whose negatives run ranks a near-copy of the gold first and a near-copy of
    its second negative third."""
    collection = make_collection()
    gold, edited, first, first_copy, second, third = make_text_passages(
        collection, [GOLD, GOLD_EDITED, FIRST, FIRST_COPY, SECOND, THIRD]
    )
    query = make_text_query(collection, "Where did the clerk keep the salt prices? [masked sentence(s)]")
    add_qrels(query, {gold: 1})
    run = make_run(collection)
    add_hits(run, query, [(edited, 9.0), (first, 8.0), (first_copy, 7.0), (second, 6.0), (third, 5.0)])
    return collection, run, {"first": first, "second": second, "third": third}


def test_near_copies_are_replaced_by_the_next_negatives_and_counted(beir_item):
    collection, run, passages = beir_item
    creation = create_proxy_study(
        name="hygiene", collection=collection, negatives_run=run, items=1, candidates=3, seed=1
    )
    item = creation.study.items.get()
    shown = {candidate.passage_id for candidate in item.candidates.filter(is_gold=False)}
    assert shown == {passages["first"].pk, passages["second"].pk}
    hygiene = creation.study.parameters["candidate_hygiene"]
    assert (hygiene["overlaps_gold"], hygiene["duplicates_negative"], hygiene["repeats_context"]) == (1, 1, 0)
    assert (hygiene["negatives_replaced"], hygiene["items_affected"]) == (2, 1)
    assert creation.summary()["candidate_hygiene"] == hygiene


def test_a_run_with_nothing_left_after_the_near_copies_skips_the_query(beir_item):
    collection, run, _ = beir_item
    with pytest.raises(InputError, match="only 3 usable negatives, 4 needed"):
        create_proxy_study(name="too many", collection=collection, negatives_run=run, items=1, candidates=5)


def test_the_study_page_and_the_rest_detail_show_the_count(beir_item, client):
    collection, run, _ = beir_item
    study = create_proxy_study(name="shown", collection=collection, negatives_run=run, items=1, candidates=3).study
    staff = make_user(staff=True)
    client.force_login(staff)
    page = client.get(f"/studies/{study.pk}/").content.decode()
    assert "2 negatives replaced" in page and "1 near-copy of the gold" in page
    assert "1 near-copy of another negative" in page
    detail = api_client(staff).get(f"/api/studies/{study.pk}/").json()
    assert detail["parameters"]["candidate_hygiene"]["negatives_replaced"] == 2


@pytest.mark.data
def test_birco_relic_dev_items_hold_no_long_shared_span_and_the_count_is_reported(shared_data):
    """The dataset's README counts 64 dev negatives sharing a 60-character span with their
    positive. Checked here with difflib, independently of the shingle rule: no two candidates of
    an item share 60 characters."""
    call_json_command("import_beir", shared_data / "birco-relic-dev", "--collection", "birco-relic-dev")
    run_id = call_json_command("retrieve", "--collection", "birco-relic-dev", "--retriever", "bm25", "--depth", 100)[
        "run_id"
    ]
    creation = create_proxy_study(
        name="birco hygiene",
        collection=Collection.objects.get(name="birco-relic-dev"),
        negatives_run=Run.objects.get(pk=run_id),
        items=50,
        candidates=4,
        seed=7,
    )
    assert creation.items == 50
    for item in creation.study.items.prefetch_related("candidates__passage"):
        texts = [candidate.passage.text for candidate in item.candidates.all()]
        for first, second in combinations(texts, 2):
            match = SequenceMatcher(None, first, second, autojunk=False).find_longest_match()
            assert match.size < 60, (item.pk, first[match.a : match.a + match.size])
    hygiene = creation.study.parameters["candidate_hygiene"]
    print("birco-relic-dev candidate hygiene (4 candidates, bm25 depth 100, seed 7):", hygiene)
    assert hygiene["overlaps_gold"] > 0


def test_short_formulaic_sentences_are_not_near_duplicates():
    first = text_print("Sentence number 10 of the novel says something of its own.")
    second = text_print("Sentence number 11 of the novel says something of its own.")
    assert shared_share(first, second) > 0.5  # 4 of 7 shingles, but only 8 words in common
    assert not near_duplicates(first, second)
