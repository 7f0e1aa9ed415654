"""Peer validation: a sample of each annotator's judgments goes to another annotator, who sees
the item and the answer (not its author, the gold, or other reviews) and passes or fails it;
each annotator's pass rate is tracked against the study's target (PlotRetrieval's 95 %)."""

import json
import math

import pytest
from django.utils import timezone

from annotation.models import Assignment, Judgment, PeerReview
from annotation.services import AnnotationForbidden
from annotation.services.quality import (
    block_annotator,
    next_peer_review,
    peer_pass_rates,
    sample_for_peer_review,
    submit_peer_review,
)
from retrieval.errors import InputError
from tests.factories import add_judgment, make_annotator, make_relic_proxy_study

pytestmark = pytest.mark.django_db


def reviewed_study(names=("ann", "ben", "cat"), items=10, rate=0.2):
    """A proxy study in which every named annotator judged every item (choosing the gold)."""
    study = make_relic_proxy_study(items, judgments_per_item=len(names))
    study.peer_review_rate = rate
    study.save()
    people = [make_annotator(name) for name in names]
    for item in study.items.all():
        for slot, person in enumerate(people):
            add_judgment(item, person, position=item.candidates.get(is_gold=True).position)
            # Each judgment holds one of the item's slots, as submitted and imported ones do.
            Assignment.objects.create(
                item=item, annotator=person, slot=slot, state=Assignment.State.SUBMITTED, expires_at=timezone.now()
            )
    return study, people


def assignments(study) -> list[tuple[str, str, int]]:
    return sorted(
        PeerReview.objects.filter(judgment__item__study=study).values_list(
            "judgment__annotator__username", "reviewer__username", "judgment__item__position"
        )
    )


def test_each_annotator_gets_a_rate_sized_sample_reviewed_by_someone_else():
    study, people = reviewed_study()
    summary = sample_for_peer_review(study, seed=1)
    assert summary == {"assigned": 6, "unassigned": 0, "reviews": 6}
    rows = assignments(study)
    for person in people:
        assert sum(author == person.username for author, _, _ in rows) == math.ceil(0.2 * 10)
    assert all(author != reviewer for author, reviewer, _ in rows)
    assert {reviewer for _, reviewer, _ in rows} == {"ann", "ben", "cat"}


def test_a_reviewer_who_did_not_judge_the_item_is_preferred():
    study, (ann, ben) = reviewed_study(names=("ann", "ben"))
    fresh = make_annotator("fresh")
    study.annotators.set([ann, ben, fresh])
    sample_for_peer_review(study, seed=3)
    assert {reviewer for _, reviewer, _ in assignments(study)} == {"fresh"}


def test_sampling_again_tops_up_instead_of_sampling_twice():
    study, _ = reviewed_study()
    sample_for_peer_review(study, seed=1)
    assert sample_for_peer_review(study, seed=1)["assigned"] == 0
    study.peer_review_rate = 0.5
    study.save()
    assert sample_for_peer_review(study, seed=1) == {"assigned": 9, "unassigned": 0, "reviews": 15}


def test_the_same_seed_on_the_same_data_assigns_the_same_reviews():
    first, _ = reviewed_study(names=("a1", "b1", "c1"))
    second, _ = reviewed_study(names=("a2", "b2", "c2"))
    sample_for_peer_review(first, seed=4)
    sample_for_peer_review(second, seed=4)
    rename = str.maketrans("2", "1")
    assert assignments(first) == [
        (author.translate(rename), reviewer.translate(rename), position)
        for author, reviewer, position in assignments(second)
    ]


def test_blocked_annotators_neither_review_nor_get_their_excluded_work_reviewed():
    study, (_ann, _ben, cat) = reviewed_study()
    block_annotator(study, cat, by=None, reason="spam")
    sample_for_peer_review(study, seed=2)
    rows = assignments(study)
    assert {author for author, _, _ in rows} == {"ann", "ben"}
    assert {reviewer for _, reviewer, _ in rows} == {"ann", "ben"}
    assert all(author != reviewer for author, reviewer, _ in rows)


def test_a_lone_annotator_has_nobody_to_review_them():
    study, _ = reviewed_study(names=("solo",))
    assert sample_for_peer_review(study) == {"assigned": 0, "unassigned": 2, "reviews": 0}


def test_sampling_needs_a_review_rate():
    study, _ = reviewed_study(rate=0.0)
    with pytest.raises(InputError) as refused:
        sample_for_peer_review(study)
    assert refused.value.field == "peer_review_rate"


def test_the_reviewer_sees_the_item_and_answer_but_not_who_gave_it_or_the_gold():
    study, (_ann, ben, cat) = reviewed_study()
    sample_for_peer_review(study, seed=1)
    review = PeerReview.objects.filter(reviewer=ben).order_by("assigned_at", "pk").first()
    PeerReview.objects.create(judgment=review.judgment, reviewer=cat, verdict="fail", comment="secret opinion")
    payload = next_peer_review(study, ben)
    assert payload["review"] == review.pk and payload["item"] == review.judgment.item_id
    assert payload["answer"]["position"] == review.judgment.choice.position
    assert payload["pending"] == 2
    text = json.dumps(payload)
    assert review.judgment.annotator.username not in text and "secret opinion" not in text
    for hidden in ("is_gold", "gold", "annotator", "verdict", "seconds", "server_seconds", "reviews"):
        assert f'"{hidden}"' not in text


def test_a_verdict_is_recorded_once_and_only_by_the_assigned_reviewer():
    study, (ann, ben, cat) = reviewed_study()
    sample_for_peer_review(study, seed=1)
    review = PeerReview.objects.filter(reviewer=ben).first()
    outsider = cat if review.judgment.annotator != cat else ann
    with pytest.raises(AnnotationForbidden, match="someone else"):
        submit_peer_review(review, reviewer=outsider, verdict="pass")
    with pytest.raises(InputError) as refused:
        submit_peer_review(review, reviewer=ben, verdict="maybe")
    assert refused.value.field == "verdict"
    first = submit_peer_review(review, reviewer=ben, verdict="fail", comment=" wrong option ")
    again = submit_peer_review(review, reviewer=ben, verdict="pass")
    assert first.created and not again.created
    assert (again.review.verdict, again.review.comment) == ("fail", "wrong option")
    assert next_peer_review(study, ben)["review"] != review.pk


def test_a_reviewer_with_nothing_pending_is_told_so():
    study, (ann, _, _) = reviewed_study()
    assert next_peer_review(study, ann) == {"finished": True, "study": study.pk, "review": None, "pending": 0}


def test_pass_rates_count_verdicts_given_on_live_judgments():
    study, (ann, ben, cat) = reviewed_study()
    judgments = list(Judgment.objects.filter(annotator=ann).order_by("pk"))
    for judgment, verdict in zip(judgments, ["pass", "pass", "fail", "pass", None]):
        PeerReview.objects.create(judgment=judgment, reviewer=ben, verdict=verdict)
    PeerReview.objects.create(judgment=judgments[5], reviewer=cat, verdict="fail")
    Judgment.objects.filter(pk=judgments[5].pk).update(voided=True)
    PeerReview.objects.create(judgment=Judgment.objects.filter(annotator=ben).first(), reviewer=ann, verdict="pass")
    assert peer_pass_rates(study) == {"ann": (3, 4, 0.75), "ben": (1, 1, 1.0)}
