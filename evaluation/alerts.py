"""Agreement thresholds and their warnings: staff set a study's thresholds
(evaluation.models.AgreementWatch); a check compares the study's and each annotator's agreement
with them, records what it found (the study page and the report show it) and announces each new
fall below a threshold with `evaluation.events.agreement_low` (webhooks: `study.agreement_low`,
`annotator.agreement_low`).

When checks run: whenever a report is computed (page, REST, command or report job; the report
carries the figures), and on a worker, from Celery beat every MARGINALIA_AGREEMENT_WATCH_SECONDS,
for each study whose counted judgments grew by its `batch_size` since the last check
(evaluation.tasks.watch_agreement). Never in an annotator's request.

Evidence: the study figure needs MIN_STUDY_UNITS units with two ratings or more, an annotator's
MIN_ANNOTATOR_PAIRS pairs with others; below that a figure is reported but never warns.

This module reads and writes rows only (no statistics), so pages and the URLconf may import it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotation.models import Study
from evaluation.events import agreement_low
from evaluation.models import AgreementWatch
from retrieval.errors import InputError

MIN_STUDY_UNITS = 10
MIN_ANNOTATOR_PAIRS = 20
DEFAULT_BATCH_SIZE = 100
MAX_BATCH_SIZE = 1_000_000
STUDY_MEASURE = "krippendorff_alpha"
ANNOTATOR_MEASURE = "cohen_kappa_vs_others"


def watch_of(study: Study) -> AgreementWatch:
    """The study's watch as stored, or an unsaved one with no thresholds and the default batch."""
    return AgreementWatch.objects.filter(study=study).first() or AgreementWatch(study=study)


def batch_size(study: Study) -> int:
    return watch_of(study).batch_size


def _threshold(value, field: str) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InputError("must be a number between -1 and 1, or empty", field=field)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"must be a number between -1 and 1, or empty; got {value!r}", field=field) from None
    if not -1.0 <= number <= 1.0:  # NaN fails this too
        raise InputError(f"must be between -1 and 1 (alpha and kappa lie there), got {number}", field=field)
    return number


def _batch(value) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()):
        raise InputError(f"must be a whole number of judgments, got {value!r}", field="batch_size")
    number = int(text)
    if not 1 <= number <= MAX_BATCH_SIZE:
        raise InputError(f"must be between 1 and {MAX_BATCH_SIZE}, got {number}", field="batch_size")
    return number


def watched(study: Study) -> bool:
    """Whether agreement thresholds apply: choice and label studies, whose reports carry the
    agreement detail; a preference study's agreement is pairwise (evaluation.preference_report)."""
    return study.kind != Study.Kind.PREFERENCE


def set_watch(study: Study, **fields) -> AgreementWatch:
    """Set any of `study_threshold`, `annotator_threshold` (numbers in [-1, 1] or None: no
    warning) and `batch_size` (judgments per batch); InputError names a bad field. A lowered or
    removed threshold clears what the last check found under the old one."""
    if not watched(study):
        raise InputError(
            "a preference study reports pairwise agreement and intransitive triples; agreement thresholds "
            "apply to choice and label studies",
            field="study",
        )
    unknown = sorted(set(fields) - {"study_threshold", "annotator_threshold", "batch_size"})
    if unknown:
        raise InputError(f"unknown setting {unknown[0]!r}", field=unknown[0])
    cleaned = {}
    for name in ("study_threshold", "annotator_threshold"):
        if name in fields:
            cleaned[name] = _threshold(fields[name], name)
    if "batch_size" in fields:
        cleaned["batch_size"] = _batch(fields["batch_size"])
    with transaction.atomic():
        watch, _ = AgreementWatch.objects.select_for_update().get_or_create(study=study)
        for name, value in cleaned.items():
            setattr(watch, name, value)
        if watch.study_threshold is None:
            watch.study_low = False
        if watch.annotator_threshold is None:
            watch.low_annotators = {}
        watch.save()
    return watch


def watch_payload(watch: AgreementWatch) -> dict:
    return {
        "study": watch.study_id,
        "study_threshold": watch.study_threshold,
        "annotator_threshold": watch.annotator_threshold,
        "batch_size": watch.batch_size,
        "study_measure": STUDY_MEASURE,
        "annotator_measure": ANNOTATOR_MEASURE,
        "checked_at": watch.checked_at.isoformat() if watch.checked_at else None,
        "checked_judgments": watch.checked_judgments,
        "study_value": watch.study_value,
        "study_low": watch.study_low,
        "low_annotators": watch.low_annotators,
    }


@dataclass(frozen=True)
class Figures:
    """What a check compares: the study's alpha over `study_units`, each annotator's kappa with
    the others over their pairs, and the counted judgments behind them."""

    judgments: int
    study_value: float | None
    study_units: int
    annotators: dict[str, tuple[float | None, int]]  # name -> (kappa, pairs)


def figures_from_report(payload: dict) -> Figures:
    detail = payload["agreement_detail"]
    return Figures(
        judgments=payload["judgments"],
        study_value=detail["study"]["value"],
        study_units=detail["study"]["units"],
        annotators={
            name: (entry["vs_others"]["cohen_kappa"], entry["vs_others"]["pairs"])
            for name, entry in detail["annotators"].items()
        },
    )


def check(study: Study, figures: Figures) -> dict:
    """Compare the figures with the study's thresholds, record what was found and announce each
    new fall below a threshold. Returns {"study_low": bool, "announced": [...]}; a study without
    thresholds records nothing."""
    with transaction.atomic():
        watch = AgreementWatch.objects.select_for_update().filter(study=study).first()
        if watch is None or (watch.study_threshold is None and watch.annotator_threshold is None):
            return {"study_low": False, "announced": []}
        now = timezone.now()
        announced = []
        study_low = (
            watch.study_threshold is not None
            and figures.study_value is not None
            and figures.study_units >= MIN_STUDY_UNITS
            and figures.study_value < watch.study_threshold
        )
        if study_low and not watch.study_low:
            agreement_low.send(
                AgreementWatch,
                study=study,
                scope="study",
                annotator=None,
                measure=STUDY_MEASURE,
                value=figures.study_value,
                threshold=watch.study_threshold,
                evidence=figures.study_units,
                checked_at=now,
            )
            announced.append({"scope": "study", "value": figures.study_value})
        low = {}
        if watch.annotator_threshold is not None:
            for name, (kappa, pairs) in sorted(figures.annotators.items()):
                if kappa is not None and pairs >= MIN_ANNOTATOR_PAIRS and kappa < watch.annotator_threshold:
                    low[name] = kappa
        for name in sorted(set(low) - set(watch.low_annotators)):
            agreement_low.send(
                AgreementWatch,
                study=study,
                scope="annotator",
                annotator=name,
                measure=ANNOTATOR_MEASURE,
                value=low[name],
                threshold=watch.annotator_threshold,
                evidence=figures.annotators[name][1],
                checked_at=now,
            )
            announced.append({"scope": "annotator", "annotator": name, "value": low[name]})
        watch.checked_at, watch.checked_judgments = now, figures.judgments
        watch.study_value, watch.study_low, watch.low_annotators = figures.study_value, study_low, low
        watch.save()
    return {"study_low": study_low, "announced": announced}


def due_studies() -> list[int]:
    """Studies with a threshold whose counted judgments may have grown by a batch since their
    last check: the worker counts them (annotation.selectors.counted_judgments) before checking."""
    return list(
        AgreementWatch.objects.exclude(study_threshold__isnull=True, annotator_threshold__isnull=True)
        .exclude(study__kind=Study.Kind.PREFERENCE)
        .order_by("study_id")
        .values_list("study_id", flat=True)
    )
