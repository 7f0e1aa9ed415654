"""Blocking: staff stop an annotator working on a study and (by default) leave their judgments
out of every statistic, the proxy study report included; unblocking undoes both."""

import pytest

from annotation.models import AnnotatorFlag, Assignment, PeerReview, StudyBlock
from annotation.selectors import counted_judgments
from annotation.services import AnnotationForbidden, annotator_refusal, claim_next_item, next_work, submit_judgment
from annotation.services.quality import block_annotator, unblock_annotator
from evaluation.services import study_report
from retrieval.errors import InputError
from tests.factories import add_judgment, make_annotator, make_relic_proxy_study, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged_study():
    """Three annotators who each judged all four items of a proxy study (the gold every time,
    except `spammer`, who always picked position 0)."""
    study = make_relic_proxy_study(4, judgments_per_item=3)
    people = [make_annotator("alice"), make_annotator("bob"), make_annotator("spammer")]
    for item in study.items.all():
        gold = item.candidates.get(is_gold=True).position
        for person in people:
            add_judgment(item, person, position=0 if person.username == "spammer" else gold)
    return study, people


def test_a_blocked_annotator_gets_no_work_and_is_told_why():
    study = make_relic_proxy_study(3)
    annotator = make_annotator()
    block_annotator(study, annotator, by=make_user(staff=True), reason="answers at random")
    assert annotator_refusal(study, annotator) == "you are blocked from this study"
    with pytest.raises(AnnotationForbidden, match="blocked from this study"):
        next_work(study, annotator)
    with pytest.raises(AnnotationForbidden):
        claim_next_item(study, annotator)
    assert annotator_refusal(make_relic_proxy_study(2), annotator) is None  # other studies are unaffected


def test_blocking_ends_the_annotators_claim_and_refuses_its_submission():
    study = make_relic_proxy_study(3, judgments_per_item=1)
    annotator = make_annotator()
    item = claim_next_item(study, annotator).item
    block_annotator(study, annotator, by=None, reason="left the project")
    assert Assignment.objects.get(annotator=annotator).state == Assignment.State.EXPIRED
    with pytest.raises(AnnotationForbidden):
        submit_judgment(annotator=annotator, item=item, position=0)
    assert claim_next_item(study, make_annotator()).item == item  # the slot is free for others


def test_blocked_annotators_judgments_leave_counted_judgments_and_the_report(judged_study):
    study, (_alice, _bob, spammer) = judged_study
    before = study_report(study)
    assert before["judgments"] == 12 and before["annotator_accuracy"]["spammer"] is not None
    block_annotator(study, spammer, by=make_user(staff=True), reason="always picks the first option")
    assert {j.annotator.username for j in counted_judgments(study)} == {"alice", "bob"}
    after = study_report(study)
    assert after["judgments"] == 8
    assert "spammer" not in after["annotator_accuracy"]


def test_a_block_may_keep_the_judgments_counted(judged_study):
    study, (_, _, spammer) = judged_study
    block_annotator(study, spammer, by=None, reason="no more work, but the answers were fine", exclude_judgments=False)
    assert counted_judgments(study).count() == 12
    with pytest.raises(AnnotationForbidden):
        next_work(study, spammer)


def test_unblocking_restores_work_and_counts_the_judgments_again(judged_study):
    study, (_, _, spammer) = judged_study
    block_annotator(study, spammer, by=None, reason="checking")
    assert unblock_annotator(study, spammer) is True
    assert unblock_annotator(study, spammer) is False
    assert counted_judgments(study).count() == 12
    assert annotator_refusal(study, spammer) is None


def test_blocking_resolves_open_flags_and_withdraws_pending_reviews(judged_study):
    study, (alice, _, spammer) = judged_study
    staff = make_user(staff=True)
    AnnotatorFlag.objects.create(
        study=study, annotator=spammer, reason=AnnotatorFlag.Reason.TOO_FAST, value=1, threshold=3
    )
    alice_judgment = alice.judgments.first()
    PeerReview.objects.create(judgment=alice_judgment, reviewer=spammer)
    block_annotator(study, spammer, by=staff, reason="too fast")
    flag = AnnotatorFlag.objects.get(annotator=spammer)
    assert flag.resolved_by == staff and flag.resolved_at is not None
    assert not PeerReview.objects.filter(reviewer=spammer).exists()


def test_blocking_needs_a_reason_and_blocking_again_updates_it(judged_study):
    study, (_, _, spammer) = judged_study
    with pytest.raises(InputError) as refused:
        block_annotator(study, spammer, by=None, reason="  ")
    assert refused.value.field == "reason" and not StudyBlock.objects.exists()
    block_annotator(study, spammer, by=None, reason="first")
    block_annotator(study, spammer, by=None, reason="second", exclude_judgments=False)
    block = StudyBlock.objects.get()
    assert (block.reason, block.exclude_judgments) == ("second", False)


def test_a_globally_blocked_profile_still_blocks_everywhere():
    study = make_relic_proxy_study(2)
    with pytest.raises(AnnotationForbidden, match="blocked from annotation"):
        next_work(study, make_annotator(blocked=True))
