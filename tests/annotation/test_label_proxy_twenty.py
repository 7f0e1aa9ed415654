"""PlotRetrieval's human study: 1 gold among 19 negatives. A 20-way proxy study is created,
shown and answered (any of the 20 positions) through the same validation as every kind."""

import pytest

from annotation.models import Judgment
from annotation.services import SubmissionRejected, claim_next_item, next_work, submit_judgment
from tests.factories import (
    api_client,
    make_annotator,
    make_neighbour_run,
    make_relic_collection,
    make_relic_proxy_study,
)

pytestmark = pytest.mark.django_db


def twenty_way_study(n_items=3):
    collection = make_relic_collection(n_items, book_sentences=10 * n_items + 60)
    return make_relic_proxy_study(n_items, collection=collection, run=make_neighbour_run(collection), candidates=20)


def test_each_item_shows_the_gold_among_19_negatives():
    study = twenty_way_study()
    assert study.candidates_per_item == 20
    for item in study.items.all():
        assert item.candidates.count() == 20 and item.candidates.filter(is_gold=True).count() == 1
        assert sorted(item.candidates.values_list("position", flat=True)) == list(range(20))


def test_the_last_position_can_be_chosen_and_a_21st_cannot():
    study = twenty_way_study()
    annotator = make_annotator()
    payload = next_work(study, annotator)
    assert [c["position"] for c in payload["candidates"]] == list(range(20))
    item = claim_next_item(study, annotator).item
    with pytest.raises(SubmissionRejected) as rejected:
        submit_judgment(annotator=annotator, item=item, position=20)
    assert "position 20" in str(rejected.value)
    judgment = submit_judgment(annotator=annotator, item=item, position=19).judgment
    assert judgment.choice.position == 19 and judgment.label is None


def test_the_rest_api_serves_and_stores_a_20_way_answer():
    study = twenty_way_study()
    client = api_client(make_annotator())
    payload = client.get(f"/api/annotate/{study.pk}/next/").json()
    assert len(payload["candidates"]) == 20
    chosen = payload["candidates"][13]
    response = client.post(
        f"/api/annotate/{study.pk}/submit/",
        {"item": payload["item"], "candidate": chosen["id"], "seconds": 41},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["position"] == 13
    assert Judgment.objects.get().choice_id == chosen["id"]
