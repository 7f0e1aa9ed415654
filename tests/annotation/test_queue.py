"""The first-come work queue: who gets which item, resuming, expiry, and the limits that hold
whatever the order of requests."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Assignment, Study
from annotation.services import AnnotationForbidden, claim_next_item, next_work, submit_judgment
from tests.factories import make_annotator, make_relic_proxy_study

pytestmark = pytest.mark.django_db


def judge(study, annotator, position=0):
    """Claim the annotator's next item and answer it; the item, or None when nothing is left."""
    assignment = claim_next_item(study, annotator)
    if assignment is None:
        return None
    submit_judgment(annotator=annotator, item=assignment.item, position=position, seconds=3)
    return assignment.item


def expire(assignment):
    Assignment.objects.filter(pk=assignment.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_a_new_annotator_gets_the_first_item_that_needs_work():
    study = make_relic_proxy_study(3)
    assignment = claim_next_item(study, make_annotator())
    assert assignment.item == study.items.order_by("position").first()
    assert assignment.state == Assignment.State.ACTIVE and assignment.slot == 0
    assert assignment.expires_at > timezone.now() + timedelta(minutes=study.claim_minutes - 1)


def test_asking_again_resumes_the_held_item():
    study = make_relic_proxy_study(3)
    annotator = make_annotator()
    first = claim_next_item(study, annotator)
    assert claim_next_item(study, annotator) == first
    assert Assignment.objects.filter(annotator=annotator).count() == 1


def test_work_spreads_to_items_with_the_fewest_judgments():
    study = make_relic_proxy_study(3)
    annotators = [make_annotator() for _ in range(3)]
    items = [claim_next_item(study, a).item for a in annotators]
    assert len(set(items)) == 3


def test_an_annotator_never_gets_the_same_item_twice():
    study = make_relic_proxy_study(4, judgments_per_item=3)
    annotator = make_annotator()
    judged = [judge(study, annotator) for _ in range(4)]
    assert len(set(judged)) == 4
    assert judge(study, annotator) is None
    assert next_work(study, annotator)["finished"] is True


def test_an_item_never_gets_more_judgments_than_it_needs():
    study = make_relic_proxy_study(2, judgments_per_item=3)
    annotators = [make_annotator() for _ in range(5)]
    for _ in range(3):
        for annotator in annotators:
            judge(study, annotator)
    for item in study.items.all():
        assert item.judgments.count() == 3
    # 2 items x 3 judgments = 6 slots; the 5 annotators have taken them all.
    assert sum(a.judgments.count() for a in annotators) == 6


def test_the_last_slot_goes_to_one_claimant_only():
    study = make_relic_proxy_study(1, judgments_per_item=2)
    first, second, third = make_annotator(), make_annotator(), make_annotator()
    assert claim_next_item(study, first) is not None
    assert claim_next_item(study, second) is not None
    assert claim_next_item(study, third) is None
    assert sorted(study.items.get().assignments.values_list("slot", flat=True)) == [0, 1]


def test_an_abandoned_claim_expires_and_returns_to_the_queue():
    study = make_relic_proxy_study(1, judgments_per_item=1)
    idle, eager = make_annotator(), make_annotator()
    held = claim_next_item(study, idle)
    assert claim_next_item(study, eager) is None
    expire(held)
    taken = claim_next_item(study, eager)
    assert taken is not None and taken.item == held.item and taken.slot == held.slot
    held.refresh_from_db()
    assert held.state == Assignment.State.EXPIRED


def test_an_expired_claim_is_not_resumed_but_replaced():
    study = make_relic_proxy_study(2)
    annotator = make_annotator()
    old = claim_next_item(study, annotator)
    expire(old)
    new = claim_next_item(study, annotator)
    assert new.pk != old.pk and new.state == Assignment.State.ACTIVE


def test_blocked_annotators_get_nothing():
    study = make_relic_proxy_study(2)
    with pytest.raises(AnnotationForbidden):
        claim_next_item(study, make_annotator(blocked=True))
    assert not Assignment.objects.exists()


def test_only_the_studys_annotators_get_work_when_it_names_them():
    study = make_relic_proxy_study(2)
    chosen, outsider = make_annotator(), make_annotator()
    study.annotators.set([chosen])
    assert claim_next_item(study, chosen) is not None
    with pytest.raises(AnnotationForbidden):
        claim_next_item(study, outsider)


def test_inactive_users_get_nothing():
    study = make_relic_proxy_study(1)
    annotator = make_annotator()
    annotator.is_active = False
    annotator.save()
    with pytest.raises(AnnotationForbidden):
        claim_next_item(study, annotator)


def test_a_closed_study_hands_out_no_work():
    study = make_relic_proxy_study(1)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
    study.refresh_from_db()
    assert claim_next_item(study, make_annotator()) is None


def test_next_work_reports_progress():
    study = make_relic_proxy_study(3)
    annotator = make_annotator()
    judge(study, annotator)
    payload = next_work(study, annotator)
    assert payload["finished"] is False
    assert payload["progress"] == {"done": 1, "total": 3}
