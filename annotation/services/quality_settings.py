"""A study's quality-control settings, and creating a study together with them.

The create_*_study services make a study's items; the settings here say how its annotators are
checked (qualification round, hidden gold, flags, peer review). `create_with_quality` does both
in one transaction, so the staff form never leaves a study without the settings it asked for.
Known answers for label items come from the collection's qrels (`label_studies.qrel_label`);
the qualification questions and hidden gold are then drawn among them by
`quality.designate_items` / `designate_gold_share`.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from retrieval.errors import InputError

from ..models import Item, Study
from .label_studies import qrel_label
from .quality import designate_gold_share, designate_items
from .studies import StudyCreation

SHARE_SETTINGS = ("gold_rate", "gold_accuracy_threshold", "fast_fraction", "peer_review_rate", "peer_pass_target")
MAX_QUALIFICATION_ATTEMPTS = 20


def apply_quality_settings(
    study: Study,
    *,
    qualification_threshold: float | None = None,
    qualification_attempts: int = 2,
    gold_rate: float = 0.0,
    gold_accuracy_threshold: float = 0.7,
    fast_fraction: float = 0.3,
    peer_review_rate: float = 0.0,
    peer_pass_target: float = 0.95,
) -> Study:
    """Store the settings (shares between 0 and 1; a threshold of None means no qualification
    round), or InputError naming the offending one."""
    shares = {
        "gold_rate": gold_rate,
        "gold_accuracy_threshold": gold_accuracy_threshold,
        "fast_fraction": fast_fraction,
        "peer_review_rate": peer_review_rate,
        "peer_pass_target": peer_pass_target,
    }
    if qualification_threshold is not None:
        shares["qualification_threshold"] = qualification_threshold
    for name, value in shares.items():
        if not 0 <= value <= 1:
            raise InputError(f"must be a share between 0 and 1, got {value}", field=name)
    if not 1 <= qualification_attempts <= MAX_QUALIFICATION_ATTEMPTS:
        raise InputError(
            f"must be between 1 and {MAX_QUALIFICATION_ATTEMPTS}, got {qualification_attempts}",
            field="qualification_attempts",
        )
    for name, value in shares.items():
        setattr(study, name, value)
    study.qualification_threshold = qualification_threshold
    study.qualification_attempts = qualification_attempts
    study.save(update_fields=[*SHARE_SETTINGS, "qualification_threshold", "qualification_attempts"])
    return study


def known_answers_from_qrels(study: Study) -> int:
    """Give the study's unlabelled work items the answer their qrels state (see qrel_label);
    proxy items know theirs already. Returns how many items got one."""
    if study.kind == Study.Kind.PROXY:
        return 0
    labelled = 0
    for item in Item.objects.filter(study=study, role=Item.Role.WORK, expected_label__isnull=True).select_related(
        "study"
    ):
        answer = qrel_label(item)
        if answer is not None:
            Item.objects.filter(pk=item.pk).update(expected_label=answer)
            labelled += 1
    return labelled


def create_with_quality(
    create: Callable[..., StudyCreation], *, quality: dict, qualification_questions: int = 0, **settings
) -> StudyCreation:
    """`create(**settings)` (a create_*_study service), then its quality settings; with a
    qualification round, `qualification_questions` items with known answers become its
    questions, and hidden gold is designated at the gold rate. One transaction: a setting that
    cannot be met (too few items with known answers) leaves nothing behind."""
    with transaction.atomic():
        creation = create(**settings)
        study = apply_quality_settings(creation.study, **quality)
        if qualification_questions and study.qualification_threshold is None:
            raise InputError("questions need a pass threshold", field="qualification_threshold")
        if study.qualification_threshold is not None and qualification_questions < 1:
            raise InputError("a qualification round needs at least one question", field="qualification_questions")
        if qualification_questions or study.gold_rate:
            known_answers_from_qrels(study)
        if qualification_questions:
            try:
                designate_items(study, Item.Role.QUALIFICATION, count=qualification_questions)
            except InputError as exc:
                raise InputError(exc.message, field="qualification_questions") from exc
        designate_gold_share(study)
    return creation
