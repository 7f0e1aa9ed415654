"""Submitting judgments: one per item and annotator, immutable, timed; voiding by staff."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Assignment, Judgment
from annotation.selectors import counted_judgments
from annotation.services import (
    AnnotationForbidden,
    SubmissionRejected,
    claim_next_item,
    clamp_seconds,
    submit_judgment,
    void_judgment,
)
from annotation.services.queue import MAX_REPORTED_SECONDS
from retrieval.errors import InputError
from tests.factories import make_annotator, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db


def claimed(study=None, annotator=None):
    study = study or make_relic_proxy_study(2)
    annotator = annotator or make_annotator()
    return study, annotator, claim_next_item(study, annotator)


def test_a_submission_stores_the_chosen_candidate_and_closes_the_claim():
    _study, annotator, assignment = claimed()
    candidate = assignment.item.candidates.get(position=2)
    submission = submit_judgment(annotator=annotator, item=assignment.item, candidate=candidate, seconds=12.5)
    assert submission.created
    judgment = submission.judgment
    assert (judgment.choice, judgment.seconds, judgment.source) == (candidate, 12.5, Judgment.Source.WEB)
    assert judgment.server_seconds is not None and judgment.server_seconds >= 0
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.SUBMITTED and assignment.submitted_at is not None
    assert judgment.assignment == assignment


def test_the_position_can_stand_for_the_candidate():
    _, annotator, assignment = claimed()
    judgment = submit_judgment(annotator=annotator, item=assignment.item, position=1).judgment
    assert judgment.choice == assignment.item.candidates.get(position=1)


def test_a_resubmission_returns_the_stored_judgment_unchanged():
    _, annotator, assignment = claimed()
    first = submit_judgment(annotator=annotator, item=assignment.item, position=0, seconds=5).judgment
    again = submit_judgment(annotator=annotator, item=assignment.item, position=2, seconds=99)
    assert not again.created
    assert again.judgment.pk == first.pk and again.judgment.choice.position == 0 and again.judgment.seconds == 5
    assert Judgment.objects.count() == 1


def test_a_stored_judgment_cannot_be_rewritten():
    _, annotator, assignment = claimed()
    judgment = submit_judgment(annotator=annotator, item=assignment.item, position=0).judgment
    judgment.choice = assignment.item.candidates.get(position=1)
    with pytest.raises(ValueError):
        judgment.save()
    judgment.refresh_from_db()
    assert judgment.choice.position == 0


@pytest.mark.parametrize(
    ("reported", "stored"),
    [(4.2, 4.2), (-3, 0.0), (10**9, MAX_REPORTED_SECONDS), (float("nan"), None), ("soon", None), (None, None)],
)
def test_reported_seconds_are_clamped_to_a_sane_range(reported, stored):
    assert clamp_seconds(reported) == stored


def test_submitting_without_a_claim_is_rejected():
    study = make_relic_proxy_study(2)
    with pytest.raises(SubmissionRejected) as rejected:
        submit_judgment(annotator=make_annotator(), item=study.items.first(), position=0)
    assert rejected.value.conflict
    assert not Judgment.objects.exists()


def test_a_candidate_of_another_item_is_rejected():
    study, annotator, assignment = claimed()
    other_item = study.items.exclude(pk=assignment.item.pk).first()
    with pytest.raises(SubmissionRejected):
        submit_judgment(annotator=annotator, item=assignment.item, candidate=other_item.candidates.first())
    with pytest.raises(SubmissionRejected):
        submit_judgment(annotator=annotator, item=assignment.item, position=7)
    assert not Judgment.objects.exists()


def test_a_late_submission_is_accepted_when_nobody_took_the_slot():
    _study, annotator, assignment = claimed(make_relic_proxy_study(1, judgments_per_item=2))
    Assignment.objects.filter(pk=assignment.pk).update(
        state=Assignment.State.EXPIRED, expires_at=timezone.now() - timedelta(minutes=1)
    )
    submission = submit_judgment(annotator=annotator, item=assignment.item, position=1)
    assert submission.created
    assignment.refresh_from_db()
    assert assignment.state == Assignment.State.SUBMITTED


def test_a_late_submission_is_rejected_when_others_completed_the_item():
    study, late, assignment = claimed(make_relic_proxy_study(1, judgments_per_item=1))
    Assignment.objects.filter(pk=assignment.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    replacement = make_annotator()
    taken = claim_next_item(study, replacement)
    submit_judgment(annotator=replacement, item=taken.item, position=0)
    with pytest.raises(SubmissionRejected) as rejected:
        submit_judgment(annotator=late, item=assignment.item, position=1)
    assert rejected.value.conflict
    assert assignment.item.judgments.count() == 1


def test_blocked_annotators_cannot_submit():
    _study, annotator, assignment = claimed()
    annotator.annotator_profile.blocked = True
    annotator.annotator_profile.save()
    with pytest.raises(AnnotationForbidden):
        submit_judgment(annotator=annotator, item=assignment.item, position=0)


def test_voiding_keeps_the_judgment_excludes_it_and_frees_its_slot():
    study = make_relic_proxy_study(1, judgments_per_item=1)
    careless, staff, replacement = make_annotator(), make_user(staff=True), make_annotator()
    assignment = claim_next_item(study, careless)
    judgment = submit_judgment(annotator=careless, item=assignment.item, position=0).judgment
    assert list(counted_judgments(study)) == [judgment]
    assert claim_next_item(study, replacement) is None

    void_judgment(judgment, by=staff, reason="answered in 0.4 seconds")
    judgment.refresh_from_db()
    assert (judgment.voided, judgment.void_reason, judgment.voided_by) == (True, "answered in 0.4 seconds", staff)
    assert judgment.voided_at is not None and judgment.choice.position == 0
    assert list(counted_judgments(study)) == []
    # The item needs a judgment again, but never from the annotator who was voided.
    assert claim_next_item(study, careless) is None
    assert claim_next_item(study, replacement).item == assignment.item


def test_voiding_needs_a_reason_and_is_done_once():
    _, annotator, assignment = claimed()
    judgment = submit_judgment(annotator=annotator, item=assignment.item, position=0).judgment
    staff = make_user(staff=True)
    with pytest.raises(InputError):
        void_judgment(judgment, by=staff, reason="  ")
    void_judgment(judgment, by=staff, reason="first")
    void_judgment(judgment, by=staff, reason="second")
    judgment.refresh_from_db()
    assert judgment.void_reason == "first"
