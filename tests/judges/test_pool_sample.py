"""A pool sampled for a judge too slow for all of it (judge_card --sample): seeded, stratified by
the human grade within each query (every query keeps each of its grades, the rest shared in
proportion), deterministic, in pool order, a larger sample keeping a smaller one's pairs;
refused with one line naming `sample` below one pair per stratum, and with a 400 naming the
field from REST, queueing nothing; the judge page says a card was sampled."""

import random

import pytest
from django.template import Context, Template

from evaluation.judge_card import SAMPLE_STRATEGY
from jobs.models import Job
from judges.models import JudgeCard
from judges.pools import pool_strata, qrels_pool, stratified_sample
from judges.services import register_judge
from retrieval.errors import InputError
from retrieval.qrels_sources import load_qrels
from tests.factories import add_qrels, api_client, make_collection, make_text_passages, make_text_query, make_user

pytestmark = pytest.mark.django_db

# Query -> how many pairs of each grade: a few relevant pairs among many that are not, as in a
# real qrels file (BIRCO's RELiC: one relevant of about 50 per query).
SHAPE = {"q0": {2: 1, 1: 3, 0: 36}, "q1": {1: 2, 0: 18}, "q2": {1: 1, 0: 9}}


@pytest.fixture
def pool():
    collection = make_collection("sampled")
    for name, grades in SHAPE.items():
        query = make_text_query(collection, f"What does {name} ask?", external_id=name)
        labels = [grade for grade, count in grades.items() for _ in range(count)]
        random.Random(name).shuffle(labels)  # grades spread through the pool's order
        passages = make_text_passages(collection, [f"{name} passage {index}" for index in range(len(labels))])
        add_qrels(query, dict(zip(passages, labels)))
    judge = register_judge("sampler", "openai", {"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    return collection, judge, qrels_pool(collection, judge), load_qrels(collection).judgments


def counts(pairs, grades) -> dict:
    found: dict[tuple, int] = {}
    for pair in pairs:
        key = (pair.query.external_id, grades[pair.query.pk][pair.passage.pk])
        found[key] = found.get(key, 0) + 1
    return found


def test_every_query_keeps_each_grade_and_the_rest_is_shared_in_proportion(pool):
    _, _, pairs, grades = pool
    assert len(pairs) == 70 and pool_strata(grades) == 7

    sample = stratified_sample(pairs, grades, 21, seed=3)

    # One of each of the 7 strata, then 14 more over the 63 pairs left in proportion:
    # q0/0 35 x 14/63 = 7.78, q1/0 17 x 14/63 = 3.78, q2/0 8 x 14/63 = 1.78, q0/1 2 x 14/63 = 0.44,
    # q1/1 1 x 14/63 = 0.22, the rest 0: floors 7 + 3 + 1 = 11, and the three largest remainders
    # (0.78 three times) take the 3 pairs left.
    assert counts(sample, grades) == {
        ("q0", 2): 1,
        ("q0", 1): 1,
        ("q0", 0): 1 + 8,
        ("q1", 1): 1,
        ("q1", 0): 1 + 4,
        ("q2", 1): 1,
        ("q2", 0): 1 + 2,
    }
    keys = [(pair.query.pk, pair.passage.pk) for pair in sample]
    assert len(set(keys)) == 21
    assert keys == [(pair.query.pk, pair.passage.pk) for pair in pairs if (pair.query.pk, pair.passage.pk) in keys]


def test_the_same_seed_draws_the_same_pairs_and_another_seed_others(pool):
    _, _, pairs, grades = pool
    draws = {seed: stratified_sample(pairs, grades, 30, seed) for seed in (0, 1)}

    assert stratified_sample(pairs, grades, 30, 0) == draws[0]
    assert draws[0] != draws[1]
    assert counts(draws[0], grades) == counts(draws[1], grades)  # the allocation does not depend on the seed
    reversed_keys = {pair.query.pk: dict(reversed(grades[pair.query.pk].items())) for pair in pairs}
    assert stratified_sample(pairs, reversed_keys, 30, 0) == draws[0]  # nor on the labels' dict order


def test_a_larger_sample_under_the_same_seed_keeps_the_smaller_ones_pairs(pool):
    _, _, pairs, grades = pool

    def keys(size):
        return {(pair.query.pk, pair.passage.pk) for pair in stratified_sample(pairs, grades, size, seed=5)}

    assert keys(7) < keys(21) < keys(40) < keys(69)


def test_the_smallest_sample_is_one_pair_per_stratum_and_a_sample_as_large_as_the_pool_is_the_pool(pool):
    _, _, pairs, grades = pool

    assert counts(stratified_sample(pairs, grades, 7, seed=0), grades) == dict.fromkeys(counts(pairs, grades), 1)
    assert stratified_sample(pairs, grades, 70, seed=0) == pairs
    assert stratified_sample(pairs, grades, 500, seed=0) == pairs
    with pytest.raises(InputError) as refused:
        stratified_sample(pairs, grades, 6, seed=0)
    assert refused.value.field == "sample" and "at least 7" in refused.value.message


@pytest.mark.parametrize(
    ("change", "field"), [({"sample": 6}, "sample"), ({"sample": "x"}, "sample"), ({"sample_seed": -1}, "sample_seed")]
)
def test_a_card_request_with_a_bad_sample_is_a_400_naming_the_field_and_queues_nothing(pool, change, field):
    collection, judge, _, _ = pool

    response = api_client(make_user(staff=True)).post(
        f"/api/judges/{judge.pk}/cards/", {"collection": collection.pk, **change}, format="json"
    )

    assert response.status_code == 400 and field in response.json(), response.json()
    assert not Job.objects.exists()


def test_a_sampled_card_says_on_the_judge_page_what_it_was_asked(pool):
    collection, judge, _, _ = pool
    sample = {"size": 21, "of": 70, "share": 0.3, "seed": 3, "strata": 7, "strategy": SAMPLE_STRATEGY, "covers": "X"}
    JudgeCard.objects.create(
        judge=judge,
        collection=collection,
        human="imported",
        payload={"collection": collection.name, "pool": {"pairs": 21, "samples": 1, "labelled": 20, "sample": sample}},
    )

    rendered = Template("{% load judges_tags %}{% judge_cards judge %}").render(Context({"judge": judge}))

    assert '<td class="num">21 of 70</td>' in rendered
    assert "a seeded sample (seed 3) of 21 of the 70 pairs (0.300), stratified by human grade" in rendered
