"""The per-annotator cap (Study.max_items_per_annotator): the queue gives nobody more formal
items than the cap, progress counts out of it, and the rest of the study stays for others."""

import pytest

from annotation.models import Judgment, Study
from annotation.selectors import annotator_progress
from annotation.services import claim_next_item, next_work, submit_judgment, void_judgment
from tests.factories import make_annotator, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db


def judge_all(study, annotator) -> int:
    judged = 0
    while (assignment := claim_next_item(study, annotator)) is not None:
        submit_judgment(annotator=annotator, item=assignment.item, position=0)
        judged += 1
    return judged


def capped_study(items: int, cap: int | None) -> Study:
    study = make_relic_proxy_study(items, judgments_per_item=2)
    Study.objects.filter(pk=study.pk).update(max_items_per_annotator=cap)
    study.refresh_from_db()
    return study


def test_an_annotator_judges_no_more_than_the_cap_and_is_then_finished():
    study = capped_study(5, cap=2)
    annotator = make_annotator()
    assert judge_all(study, annotator) == 2
    work = next_work(study, annotator)
    assert work["finished"] is True and work["progress"] == {"done": 2, "total": 2}


def test_the_cap_leaves_the_rest_of_the_study_to_other_annotators():
    study = capped_study(4, cap=2)
    first, second = make_annotator(), make_annotator()
    judge_all(study, first)
    judge_all(study, second)
    judged_items = [set(Judgment.objects.filter(annotator=a).values_list("item", flat=True)) for a in (first, second)]
    assert judged_items[0].isdisjoint(judged_items[1])  # the queue spread them over all four items


def test_a_voided_judgment_still_counts_towards_the_cap():
    study = capped_study(4, cap=1)
    annotator = make_annotator()
    judge_all(study, annotator)
    void_judgment(Judgment.objects.get(annotator=annotator), by=make_user(staff=True), reason="test")
    assert claim_next_item(study, annotator) is None


def test_without_a_cap_an_annotator_may_judge_every_item():
    study = capped_study(3, cap=None)
    annotator = make_annotator()
    assert judge_all(study, annotator) == 3
    assert annotator_progress(study, annotator) == {"done": 3, "total": 3}


def test_a_cap_above_the_study_size_changes_nothing():
    study = capped_study(3, cap=10)
    assert judge_all(study, make_annotator()) == 3
