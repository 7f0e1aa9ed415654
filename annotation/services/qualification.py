"""Qualification rounds: the questions with known answers an annotator must pass before formal
work in a study that sets `qualification_threshold`.

An attempt is one pass through all of the study's qualification items, in an order shuffled per
annotator and attempt (seeded by the study seed), so a retry does not replay the same sequence.
When its last question is answered the attempt is scored: passed when correct / total reaches
the threshold. A failed attempt may be retried while fewer than `qualification_attempts` have
been made; after that the annotator is locked out of the study. Answers are QualificationAnswer
rows, never Judgments: retries stay possible and no statistic ever sees practice answers.

This module decides and records; `queue.py` turns its states into refusals and payloads.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from ..models import Item, QualificationAnswer, QualificationAttempt, Study
from .labels import Answer, is_correct
from .locks import lock_rows


class QualificationStatus:
    NOT_REQUIRED = "not_required"  # the study has no qualification round
    NOT_READY = "not_ready"  # a round is required but the study has no qualification items yet
    READY = "ready"  # the next attempt (the first, or a retry) starts when the annotator asks for work
    IN_PROGRESS = "in_progress"
    PASSED = "passed"
    LOCKED_OUT = "locked_out"  # every allowed attempt failed


@dataclass(frozen=True)
class QualificationState:
    status: str
    threshold: float | None
    attempts_allowed: int
    attempts_made: int
    questions: int
    current: QualificationAttempt | None = None  # the open attempt
    answered: int = 0  # answers in the open attempt
    last: QualificationAttempt | None = None  # the latest finished attempt

    @property
    def qualified(self) -> bool:
        return self.status in (QualificationStatus.NOT_REQUIRED, QualificationStatus.PASSED)

    def refusal(self) -> str | None:
        """Why this state keeps the annotator out of the study altogether, or None."""
        if self.status == QualificationStatus.NOT_READY:
            return "this study's qualification round has no questions yet; please come back later"
        if self.status == QualificationStatus.LOCKED_OUT:
            last = self.last
            return (
                f"you did not pass the qualification round: all {self.attempts_allowed} attempts used "
                f"(last attempt {last.correct} of {last.total} correct; {self.threshold:.0%} needed)"
            )
        return None

    def payload(self) -> dict:
        """What the annotator's page shows: "qualification round, attempt 2 of 3", how far they
        are, and the result of their last attempt. Never which answers were right."""
        attempt = self.current.number if self.current else None
        if self.status == QualificationStatus.READY:
            attempt = self.attempts_made + 1
        last = self.last
        return {
            "status": self.status,
            "threshold": self.threshold,
            "attempt": attempt,
            "attempts_allowed": self.attempts_allowed,
            "answered": self.answered,
            "questions": self.questions,
            "last_attempt": None
            if last is None
            else {
                "number": last.number,
                "correct": last.correct,
                "total": last.total,
                "passed": bool(last.passed),
            },
        }


def qualification_state(study: Study, annotator) -> QualificationState:
    """Where the annotator stands in the study's qualification round."""
    allowed = study.qualification_attempts
    if study.qualification_threshold is None:
        return QualificationState(QualificationStatus.NOT_REQUIRED, None, allowed, 0, 0)
    questions = qualification_items(study).count()
    attempts = list(QualificationAttempt.objects.filter(study=study, annotator=annotator).order_by("number"))
    finished = [attempt for attempt in attempts if attempt.finished_at is not None]
    current = next((attempt for attempt in attempts if attempt.finished_at is None), None)
    state = {
        "threshold": study.qualification_threshold,
        "attempts_allowed": allowed,
        "attempts_made": len(finished),
        "questions": questions,
        "current": current,
        "last": finished[-1] if finished else None,
    }
    if any(attempt.passed for attempt in finished):
        return QualificationState(QualificationStatus.PASSED, **state)
    if current is None and len(finished) >= allowed:
        return QualificationState(QualificationStatus.LOCKED_OUT, **state)
    if questions == 0:
        return QualificationState(QualificationStatus.NOT_READY, **state)
    if current is not None:
        return QualificationState(QualificationStatus.IN_PROGRESS, answered=current.answers.count(), **state)
    return QualificationState(QualificationStatus.READY, **state)


def qualification_items(study: Study):
    return Item.objects.filter(study=study, role=Item.Role.QUALIFICATION)


def next_question(study: Study, annotator) -> tuple[QualificationAttempt, Item] | None:
    """The annotator's open attempt and its next unanswered question, opening an attempt (the
    first, or a retry) when none is open; None when the round is decided or cannot start."""
    with transaction.atomic():
        # One annotator's parallel requests (two tabs) must share one attempt, not open two.
        lock_rows(get_user_model().objects.filter(pk=annotator.pk))
        # An open attempt whose questions are all answered (questions removed meanwhile) is
        # scored here, and the state looked at again.
        for _ in range(2):
            state = qualification_state(study, annotator)
            if state.status == QualificationStatus.READY:
                attempt = QualificationAttempt.objects.create(
                    study=study, annotator=annotator, number=state.attempts_made + 1, total=state.questions
                )
            elif state.status == QualificationStatus.IN_PROGRESS:
                attempt = state.current
            else:
                return None
            item = _first_unanswered(attempt)
            if item is not None:
                return attempt, item
            _score(attempt)
    return None


def record_answer(attempt: QualificationAttempt, item: Item, answer: Answer) -> QualificationAnswer:
    """Store a validated answer to a question the open attempt has not answered yet (call inside
    a transaction holding the annotator's lock); scores the attempt after its last question."""
    recorded = QualificationAnswer.objects.create(
        attempt=attempt,
        item=item,
        choice=answer.choice,
        label=answer.label,
        selections=answer.selections,
        correct=is_correct(item, answer) is True,
    )
    if _first_unanswered(attempt) is None:
        _score(attempt)
    return recorded


def question_order(attempt: QualificationAttempt) -> list[Item]:
    """The attempt's questions in its own seeded order (per study seed, annotator and attempt)."""
    items = list(qualification_items(attempt.study).order_by("position"))
    random.Random(f"{attempt.study.seed}:qualification:{attempt.annotator_id}:{attempt.number}").shuffle(items)
    return items


def _first_unanswered(attempt: QualificationAttempt) -> Item | None:
    answered = set(attempt.answers.values_list("item_id", flat=True))
    return next((item for item in question_order(attempt) if item.pk not in answered), None)


def _score(attempt: QualificationAttempt) -> None:
    """Finish the attempt over the study's current qualification items: passed when the share
    answered correctly reaches the threshold (compared as correct / total, so 9 of 10 meets 0.9)."""
    answers = attempt.answers.filter(item__role=Item.Role.QUALIFICATION)
    total = qualification_items(attempt.study).count()
    correct = answers.filter(correct=True).count()
    attempt.correct, attempt.total = correct, total
    attempt.passed = total > 0 and correct / total >= attempt.study.qualification_threshold
    attempt.finished_at = timezone.now()
    attempt.save(update_fields=["correct", "total", "passed", "finished_at"])


def qualification_receipt(answer: QualificationAnswer) -> dict:
    """What the annotator gets back for a qualification answer: what was stored and where the
    round stands (the attempt's result once its last question is answered), never whether this
    answer was right: a retry asks the same questions."""
    attempt = answer.attempt
    return {
        "item": answer.item_id,
        "candidate": answer.choice_id,
        "position": answer.choice.position if answer.choice else None,
        "label": answer.label,
        "selections": answer.selections,
        "answered_at": answer.answered_at.isoformat(),
        "qualification": qualification_state(attempt.study, attempt.annotator).payload(),
    }
