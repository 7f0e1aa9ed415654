"""Staff's choices about how a study's items are presented (annotation/presentation.py holds the
rules): the candidate order, the page's keys and auto-advance. Set when a study is created (the
staff form and POST /api/studies/, through `create_with_presentation`) or later
(`/api/studies/ID/presentation/`)."""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django.db.models import Count, Max

from retrieval.errors import InputError

from ..label_schema import study_schema
from ..models import Item, Judgment, Study
from ..presentation import answer_keys, validate_keyboard
from .studies import StudyCreation

PRESENTATION_FIELDS = ("candidate_order", "keyboard", "auto_advance")


def presentation_settings(study: Study) -> dict:
    """The study's presentation settings as the API shows them (keyboard: only what differs
    from the defaults)."""
    return {name: getattr(study, name) for name in PRESENTATION_FIELDS}


def apply_presentation(
    study: Study, *, candidate_order: str | None = None, keyboard: dict | None = None, auto_advance: bool | None = None
) -> Study:
    """Store the settings given (None keeps the current one), or InputError naming the field.
    The candidate order cannot change once the study has judgments: those already given were
    shown in the old order, and an annotator holding an item would see it reshuffled. (A
    judgment racing the change keeps the order it recorded, so no statistic is misread.) A
    preference study keeps its own keys (1, 2, t, b, rank keys) and shuffles each item itself,
    recording the order in the answer: these settings are refused there."""
    asked = {
        "candidate_order": candidate_order not in (None, Study.CandidateOrder.ITEM),
        "keyboard": bool(keyboard),
        "auto_advance": bool(auto_advance),
    }
    if study.kind == Study.Kind.PREFERENCE and any(asked.values()):
        field = next(name for name, changed in asked.items() if changed)
        raise InputError(
            "a preference study keeps its own keys and shuffles each item itself; this setting is for the other kinds",
            field=field,
        )
    if candidate_order is not None and candidate_order != study.candidate_order:
        if candidate_order not in Study.CandidateOrder.values:
            raise InputError(
                f"must be one of {', '.join(Study.CandidateOrder.values)}, got {candidate_order!r}",
                field="candidate_order",
            )
        if Judgment.objects.filter(item__study=study).exists():
            raise InputError(
                "the study already has judgments, given in the current order; keep it", field="candidate_order"
            )
        study.candidate_order = candidate_order
    if keyboard is not None:
        study.keyboard = validate_keyboard(keyboard, fixed=answer_keys(study), options_needed=options_shown(study))
    if auto_advance is not None:
        if not isinstance(auto_advance, bool):
            raise InputError("must be true or false", field="auto_advance")
        study.auto_advance = auto_advance
    study.save(update_fields=list(PRESENTATION_FIELDS))
    return study


def options_shown(study: Study) -> int:
    """The most options one of the study's items asks to pick from by place: its candidates
    (proxy, multi-select items), else none (a label scale keys its values by their digits)."""
    if study.kind != Study.Kind.PROXY and not study_schema(study)["multi_select"]:
        return 0
    most = Item.objects.filter(study=study).annotate(shown=Count("candidates")).aggregate(most=Max("shown"))["most"]
    return most or 0


def create_with_presentation(create: Callable[..., StudyCreation], *, presentation: dict, **settings) -> StudyCreation:
    """`create(**settings)` (a create_*_study service, or create_with_quality around one), then
    the presentation settings, in one transaction: a key that clashes leaves no study behind."""
    with transaction.atomic():
        creation = create(**settings)
        apply_presentation(creation.study, **presentation)
    return creation
