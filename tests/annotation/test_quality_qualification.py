"""Qualification rounds: questions with known answers that an annotator must pass (here 90 %)
before formal work, with a limited number of attempts, and whose answers never become data."""

import pytest

from annotation.models import Assignment, Item, Judgment, QualificationAnswer, QualificationAttempt
from annotation.selectors import counted_judgments
from annotation.services import AnnotationForbidden, SubmissionRejected, claim_next_item, next_work, submit_judgment
from annotation.services.qualification import QualificationStatus, qualification_state
from annotation.services.quality import designate_items
from tests.factories import (
    add_label_item,
    api_client,
    gold_position,
    make_annotator,
    make_label_study,
    make_relic_proxy_study,
)

pytestmark = pytest.mark.django_db

QUESTIONS = 10


def qualification_study(threshold=0.9, attempts=3, items=14, questions=QUESTIONS):
    study = make_relic_proxy_study(items, judgments_per_item=2)
    study.qualification_threshold, study.qualification_attempts = threshold, attempts
    study.save()
    designate_items(study, Item.Role.QUALIFICATION, count=questions)
    return study


def answer_round(study, annotator, correct: int) -> list[dict]:
    """Answer every question of the annotator's current attempt, the first `correct` of them
    right and the rest wrong; the payloads served, in order."""
    served = []
    for index in range(QUESTIONS):
        work = next_work(study, annotator)
        assert work["qualification"]["status"] == QualificationStatus.IN_PROGRESS
        served.append(work)
        right = gold_position(work["item"])
        position = right if index < correct else (right + 1) % study.candidates_per_item
        submit_judgment(annotator=annotator, item=Item.objects.get(pk=work["item"]), position=position, seconds=4)
    return served


def test_a_new_annotator_is_served_qualification_questions_before_any_work():
    study = qualification_study()
    annotator = make_annotator()
    work = next_work(study, annotator)
    assert Item.objects.get(pk=work["item"]).role == Item.Role.QUALIFICATION
    assert work["qualification"] == {
        "status": "in_progress",
        "threshold": 0.9,
        "attempt": 1,
        "attempts_allowed": 3,
        "answered": 0,
        "questions": QUESTIONS,
        "last_attempt": None,
    }
    assert not Assignment.objects.filter(annotator=annotator).exists()
    with pytest.raises(AnnotationForbidden, match="qualification round first"):
        claim_next_item(study, annotator)


def test_nine_of_ten_correct_passes_and_unlocks_formal_work():
    study = qualification_study()
    annotator = make_annotator()
    answer_round(study, annotator, correct=9)
    attempt = QualificationAttempt.objects.get(study=study, annotator=annotator)
    assert (attempt.correct, attempt.total, attempt.passed) == (9, 10, True)
    work = next_work(study, annotator)
    assert Item.objects.get(pk=work["item"]).role == Item.Role.WORK
    assert work["qualification"]["status"] == QualificationStatus.PASSED
    assert work["qualification"]["last_attempt"] == {"number": 1, "correct": 9, "total": 10, "passed": True}


def test_a_failed_attempt_can_be_retried_and_the_retry_says_so():
    study = qualification_study()
    annotator = make_annotator()
    answer_round(study, annotator, correct=8)
    retry = next_work(study, annotator)
    assert Item.objects.get(pk=retry["item"]).role == Item.Role.QUALIFICATION
    assert retry["qualification"]["attempt"] == 2
    assert retry["qualification"]["attempts_allowed"] == 3
    assert retry["qualification"]["answered"] == 0
    assert retry["qualification"]["last_attempt"] == {"number": 1, "correct": 8, "total": 10, "passed": False}
    answer_round(study, annotator, correct=10)
    assert qualification_state(study, annotator).status == QualificationStatus.PASSED


def test_every_attempt_failed_locks_the_annotator_out_with_a_clear_reason():
    study = qualification_study(attempts=2)
    annotator = make_annotator()
    answer_round(study, annotator, correct=5)
    answer_round(study, annotator, correct=8)
    with pytest.raises(
        AnnotationForbidden,
        match=r"did not pass the qualification round: all 2 attempts used "
        r"\(last attempt 8 of 10 correct; 90% needed\)",
    ):
        next_work(study, annotator)
    question = study.items.filter(role=Item.Role.QUALIFICATION).first()
    with pytest.raises(AnnotationForbidden):
        submit_judgment(annotator=annotator, item=question, position=0)
    assert QualificationAttempt.objects.filter(study=study, annotator=annotator).count() == 2


def test_qualification_answers_are_never_judgments_nor_counted():
    study = qualification_study()
    annotator = make_annotator()
    answer_round(study, annotator, correct=10)
    assert QualificationAnswer.objects.filter(attempt__annotator=annotator).count() == QUESTIONS
    assert not Judgment.objects.filter(annotator=annotator).exists()
    judged = next_work(study, annotator)
    submit_judgment(annotator=annotator, item=Item.objects.get(pk=judged["item"]), position=0)
    assert [j.item_id for j in counted_judgments(study)] == [judged["item"]]
    assert next_work(study, annotator)["progress"] == {"done": 1, "total": 14 - QUESTIONS}


def test_each_attempt_asks_every_question_once_in_its_own_seeded_order():
    study = qualification_study()
    first, second = make_annotator(), make_annotator()
    first_attempt = [work["item"] for work in answer_round(study, first, correct=0)]
    retry = [work["item"] for work in answer_round(study, first, correct=0)]
    other = [work["item"] for work in answer_round(study, second, correct=0)]
    questions = set(study.items.filter(role=Item.Role.QUALIFICATION).values_list("pk", flat=True))
    assert set(first_attempt) == set(retry) == set(other) == questions
    assert len(first_attempt) == len(questions)
    assert first_attempt != retry
    assert first_attempt != other


def test_answering_a_question_twice_keeps_the_first_answer():
    study = qualification_study()
    annotator = make_annotator()
    item = Item.objects.get(pk=next_work(study, annotator)["item"])
    right = gold_position(item.pk)
    first = submit_judgment(annotator=annotator, item=item, position=right)
    again = submit_judgment(annotator=annotator, item=item, position=(right + 1) % 3)
    assert first.created and not again.created
    assert again.qualification_answer.pk == first.qualification_answer.pk
    assert again.qualification_answer.correct is True and again.judgment is None


def test_a_qualified_annotator_cannot_answer_qualification_questions_again():
    study = qualification_study()
    annotator = make_annotator()
    answer_round(study, annotator, correct=10)
    question = study.items.filter(role=Item.Role.QUALIFICATION).first()
    with pytest.raises(SubmissionRejected, match="already passed"):
        submit_judgment(annotator=annotator, item=question, position=0)


def test_a_malformed_answer_is_rejected_and_not_recorded():
    study = qualification_study()
    annotator = make_annotator()
    item = Item.objects.get(pk=next_work(study, annotator)["item"])
    with pytest.raises(SubmissionRejected, match="position"):
        submit_judgment(annotator=annotator, item=item, position=7)
    assert not QualificationAnswer.objects.exists()


def test_a_round_without_questions_refuses_work_until_staff_add_them():
    study = make_relic_proxy_study(3)
    study.qualification_threshold = 0.9
    study.save()
    with pytest.raises(AnnotationForbidden, match="no questions yet"):
        next_work(study, make_annotator())


def test_studies_without_a_round_say_so_and_serve_work_directly():
    study = make_relic_proxy_study(3)
    work = next_work(study, make_annotator())
    assert work["qualification"]["status"] == QualificationStatus.NOT_REQUIRED
    assert Item.objects.get(pk=work["item"]).role == Item.Role.WORK


def test_label_studies_score_qualification_answers_against_the_expected_label():
    study = make_label_study(items=2, qualification_threshold=1.0, qualification_attempts=1)
    questions = [add_label_item(study, role=Item.Role.QUALIFICATION, expected_label=label) for label in (1, 0)]
    annotator = make_annotator()
    for _ in questions:
        item = Item.objects.get(pk=next_work(study, annotator)["item"])
        submit_judgment(annotator=annotator, item=item, label=item.expected_label)
    assert qualification_state(study, annotator).status == QualificationStatus.PASSED
    assert Item.objects.get(pk=next_work(study, annotator)["item"]).role == Item.Role.WORK


def test_the_api_receipt_reports_progress_but_never_whether_an_answer_was_right():
    study = qualification_study()
    annotator = make_annotator()
    client = api_client(annotator)
    work = client.get(f"/api/annotate/{study.pk}/next/").json()
    response = client.post(
        f"/api/annotate/{study.pk}/submit/",
        {"item": work["item"], "position": gold_position(work["item"])},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {
        "item",
        "candidate",
        "position",
        "label",
        "selections",
        "answered_at",
        "qualification",
        "created",
    }
    assert body["qualification"]["answered"] == 1 and body["qualification"]["attempt"] == 1
    status = client.get(f"/api/annotate/{study.pk}/qualification/").json()
    assert status["status"] == "in_progress" and status["refusal"] is None
