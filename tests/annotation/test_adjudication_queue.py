"""The adjudication queue: items ordered by how much their annotators agree, lowest first, plus a
seeded sample of agreed items; the agreement score checked against independent computations;
and the stored order rebuilt exactly when what it was built from changed."""

import itertools

import numpy as np
import pytest
from sklearn.metrics import jaccard_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from annotation.models import AdjudicationQueue, AdjudicationQueueEntry, Item, Study
from annotation.provenance import AnswerScale, agreement, answer_scale
from annotation.services.adjudication import (
    build_queue,
    current_queue,
    decide,
    item_agreements,
    next_undecided,
    sample_key,
    sampled_items,
    set_sample_rate,
)
from annotation.services.quality import block_annotator
from annotation.services.queue import void_judgment
from tests.factories import (
    add_judgment,
    add_label_judgment,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
    make_user,
)

pytestmark = pytest.mark.django_db


def queue_order(study) -> list[int]:
    current_queue(study)
    return list(AdjudicationQueueEntry.objects.filter(study=study).order_by("rank").values_list("item_id", flat=True))


def judge_proxy(study, answers: list[tuple[int, ...]], people=None) -> list[Item]:
    """Item i gets one judgment per position in answers[i], by annotators 0, 1, 2, ..."""
    items = list(study.items.order_by("position"))
    people = people or [make_annotator() for _ in range(max(len(row) for row in answers))]
    for item, row in zip(items, answers):
        for person, position in zip(people, row):
            add_judgment(item, person, position=position)
    return items


# --- the agreement score -------------------------------------------------------------------------


def pairwise(answers, pair) -> float:
    """The definition as written: the mean over every pair of judgments."""
    pairs = list(itertools.combinations(answers, 2))
    return sum(pair(a, b) for a, b in pairs) / len(pairs)


def counts(answers) -> dict:
    tally = {}
    for answer in answers:
        tally[answer] = tally.get(answer, 0) + 1
    return tally


def test_agreement_on_categories_is_fleiss_per_item_agreement():
    """The mean of the items' scores is Fleiss' observed agreement P-bar, recovered from
    statsmodels' kappa and the table's chance agreement."""
    rng = np.random.default_rng(5)
    ratings = rng.integers(0, 4, size=(40, 5))
    scale = AnswerScale("categories")
    scores = [agreement(counts(row.tolist()), scale) for row in ratings]
    table, _ = aggregate_raters(ratings)
    shares = table.sum(axis=0) / table.sum()
    chance = float((shares**2).sum())
    kappa = fleiss_kappa(table, method="fleiss")
    assert np.mean(scores) == pytest.approx(kappa * (1 - chance) + chance, abs=1e-12)
    for row, score in zip(ratings.tolist(), scores):
        assert score == pytest.approx(pairwise(row, lambda a, b: float(a == b)), abs=1e-12)


def test_agreement_on_a_scale_weighs_each_pair_by_its_distance():
    rng = np.random.default_rng(9)
    scale = AnswerScale("scale", 10)
    for row in rng.integers(0, 11, size=(30, 4)).tolist():
        expected = pairwise(row, lambda a, b: 1 - abs(a - b) / 10)
        assert agreement(counts(row), scale) == pytest.approx(expected, abs=1e-12)
    assert agreement({0: 1, 10: 1}, scale) == 0 and agreement({4: 3}, scale) == 1


def test_agreement_on_selections_is_the_mean_pairwise_jaccard_index():
    rng = np.random.default_rng(3)
    scale = AnswerScale("sets")
    for _ in range(30):
        rows = [tuple(sorted(np.flatnonzero(rng.random(5) < 0.4).tolist())) for _ in range(4)]

        def jaccard(a, b):
            if not a and not b:
                return 1.0
            vector = lambda chosen: [int(p in chosen) for p in range(5)]  # noqa: E731
            return jaccard_score(vector(a), vector(b))

        assert agreement(counts(rows), scale) == pytest.approx(pairwise(rows, jaccard), abs=1e-12)


def test_one_judgment_has_no_agreement_and_a_study_kind_picks_its_scale():
    assert agreement({2: 1}, AnswerScale("categories")) is None
    assert answer_scale(make_relic_proxy_study(1)).kind == "categories"
    assert answer_scale(make_label_study(label_schema={"scale": "binary"})).kind == "categories"
    graded = answer_scale(make_label_study(label_schema={"scale": "graded-0-3"}))
    assert (graded.kind, graded.span) == ("scale", 3)
    multi = make_label_study(kind="quotability", candidates=3, label_schema={"multi_select": True})
    assert answer_scale(multi).kind == "sets"


# --- the order -------------------------------------------------------------------------------------


def test_the_queue_serves_the_lowest_agreement_first_then_study_order():
    study = make_relic_proxy_study(6)
    unanimous, split_a, none_agree, split_b, single, none_again = judge_proxy(
        study, [(1, 1, 1), (0, 0, 2), (0, 1, 2), (2, 1, 1), (0,), (2, 0, 1)]
    )
    assert queue_order(study) == [none_agree.pk, none_again.pk, split_a.pk, split_b.pk]
    scores = item_agreements(study)
    assert scores[none_agree.pk] == (0.0, 3) and scores[split_a.pk] == (pytest.approx(1 / 3), 3)
    assert scores[unanimous.pk] == (1.0, 3) and scores[single.pk] == (None, 1)


def test_on_a_graded_scale_opposite_ends_come_before_neighbouring_grades():
    study = make_label_study(items=4, label_schema={"scale": "graded-0-3"})
    items = list(study.items.order_by("position"))
    people = [make_annotator() for _ in range(3)]
    for item, labels in zip(items, [(2, 2, 3), (0, 3, 3), (1, 1, 1), (0, 3, 0)]):
        for person, label in zip(people, labels):
            add_label_judgment(item, person, label)
    # (0, 3, 3): pairs 0, 0, 1 -> 1/3; (0, 3, 0): 0, 1, 0 -> 1/3; (2, 2, 3): 1, 2/3, 2/3 -> 7/9.
    assert queue_order(study) == [items[1].pk, items[3].pk, items[0].pk]


def test_only_counted_judgments_place_an_item_and_a_block_reorders_the_queue():
    study = make_relic_proxy_study(2)
    people = [make_annotator() for _ in range(3)]
    outvoted, other = judge_proxy(study, [(1, 1, 0), (0, 1, 2)], people)
    assert queue_order(study) == [other.pk, outvoted.pk]
    block_annotator(study, people[2], by=None, reason="spam")
    assert queue_order(study) == [other.pk]  # the other item's two remaining judgments still differ


def test_a_sampled_share_of_agreed_items_joins_the_queue_after_the_disagreements():
    study = make_relic_proxy_study(12)
    answers = [(1, 1, 1)] * 10 + [(0, 1, 1), (0, 1, 2)]
    items = judge_proxy(study, answers)
    agreed = [item.pk for item in items[:10]]
    set_sample_rate(study, 0.25)
    order = queue_order(study)
    entries = {entry.item_id: entry for entry in AdjudicationQueueEntry.objects.filter(study=study)}
    drawn = sorted(agreed, key=lambda item_id: sample_key(study.seed, item_id))[:3]  # ceil(0.25 x 10)
    assert order[:2] == [items[11].pk, items[10].pk]
    assert order[2:] == sorted(drawn)  # agreement 1 each: study order among them
    assert all(entries[item_id].sampled for item_id in drawn) and not entries[items[11].pk].sampled
    assert AdjudicationQueue.objects.get(study=study).sampled == 3


def test_the_sample_is_reproducible_from_its_seed_and_changes_with_it():
    agreed = list(range(1000, 1200))
    first = sampled_items(agreed, 0.1, seed=7)
    assert len(first) == 20 and first == sampled_items(list(reversed(agreed)), 0.1, seed=7)
    assert first != sampled_items(agreed, 0.1, seed=8)
    assert sampled_items(agreed, 0.0, seed=7) == set() and sampled_items(agreed, 1.0, seed=7) == set(agreed)

    study = make_relic_proxy_study(20, seed=7)
    judge_proxy(study, [(2, 2)] * 20)
    set_sample_rate(study, 0.3)
    drawn = set(queue_order(study))
    AdjudicationQueueEntry.objects.all().delete()
    AdjudicationQueue.objects.all().delete()
    assert set(queue_order(study)) == drawn  # built again from nothing: the same items
    Study.objects.filter(pk=study.pk).update(seed=8)
    study.refresh_from_db()
    assert set(queue_order(study)) != drawn and len(queue_order(study)) == 6


# --- working in order --------------------------------------------------------------------------------


def test_the_next_item_is_the_first_undecided_one_after_the_current_wrapping_round():
    study = make_relic_proxy_study(4)
    items = judge_proxy(study, [(0, 1, 2), (0, 0, 1), (1, 2, 0), (1, 1, 2)])
    staff = make_user(staff=True)
    order = queue_order(study)
    assert order == [items[0].pk, items[2].pk, items[1].pk, items[3].pk]
    assert next_undecided(study) == items[0].pk
    decide(items[0], by=staff, position=0, reason="Annotator error")
    assert next_undecided(study) == items[2].pk
    assert next_undecided(study, items[2]) == items[1].pk
    assert next_undecided(study, items[3]) == items[2].pk  # past the end: back to the top
    for item in items[1:]:
        decide(item, by=staff, position=1, reason="Ambiguous item")
    assert next_undecided(study, items[3]) is None


# --- when the stored order is built again --------------------------------------------------------------


def test_the_stored_order_is_reused_until_a_judgment_is_added_or_voided(django_assert_max_num_queries):
    study = make_relic_proxy_study(3)
    first, second, third = judge_proxy(study, [(0, 1, 2), (1, 1, 2), (2, 2, 2)])
    built = current_queue(study)
    with django_assert_max_num_queries(4):  # the checks only: no judgment read
        assert current_queue(study).built_at == built.built_at
    add_judgment(third, make_annotator(), position=0)
    assert queue_order(study) == [first.pk, second.pk, third.pk]
    void_judgment(second.judgments.get(choice__position=2), by=None, reason="mistake")
    assert AdjudicationQueue.objects.get(study=study).stale
    assert queue_order(study) == [first.pk, third.pk]  # the second's remaining judgments agree
    assert not AdjudicationQueue.objects.get(study=study).stale


def test_judgments_in_other_studies_only_move_the_mark():
    study, elsewhere = make_relic_proxy_study(2), make_relic_proxy_study(1)
    judge_proxy(study, [(0, 1), (1, 1)])
    built = build_queue(study)
    add_judgment(elsewhere.items.get(), make_annotator(), position=0)
    queue = current_queue(study)
    assert queue.built_at == built.built_at and queue.last_judgment > built.last_judgment


def test_an_items_page_corrects_its_entry_when_a_judgment_changed_it_since(client):
    """A judgment undone after the build leaves the order as it was until the next build; the
    item's own page reads its judgments afresh and writes its agreement back."""
    study = make_relic_proxy_study(1)
    (item,) = judge_proxy(study, [(0, 1, 1)])
    current_queue(study)
    item.judgments.filter(choice__position=0).delete()
    client.force_login(make_user(staff=True))
    page = client.get(f"/studies/{study.pk}/adjudicate/{item.pk}/")
    assert page.status_code == 200 and 'id="agreement">100 %' in page.content.decode()
    assert AdjudicationQueueEntry.objects.get(item=item).agreement == 1.0
