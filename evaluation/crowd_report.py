"""The report's sections on the annotators as a crowd, for every study kind: labels by annotator
competence beside the majority vote (`aggregation`, evaluation.label_aggregation) and agreement
per annotator, label and time (`agreement_detail`, evaluation.agreement_detail); and the
worker's agreement check between reports (evaluation.alerts).

Reports fit majority and Dawid-Skene always, MACE and GLAD up to
MARGINALIA_REPORT_COMPETENCE_JUDGMENTS counted judgments (they cost about ten times as much);
the section names the methods it left out, which `aggregate_labels` fits at any size.
"""

from __future__ import annotations

from django.conf import settings

from annotation.models import Study
from annotation.selectors import counted_judgments, gold_judgments
from evaluation import alerts
from evaluation.aggregates import LABEL_METHODS
from evaluation.agreement_detail import agreement_detail, annotator_agreement, study_agreement
from evaluation.label_aggregation import fit, report_section
from evaluation.ratings import StudyRatings, study_ratings

ALWAYS_FITTED = ("majority", "dawid-skene")


def gold_label_pairs(study: Study) -> list[tuple[str, int, int]]:
    """(annotator, label given, expected label) of a single-label study's hidden gold items."""
    if study.kind == Study.Kind.PROXY:
        return []
    rows = gold_judgments(study).order_by("pk").values_list("annotator__username", "label", "item__expected_label")
    return [
        (name, int(label), int(expected))
        for name, label, expected in rows
        if isinstance(label, int) and isinstance(expected, int) and not isinstance(expected, bool)
    ]


def crowd_sections(study: Study, ratings: StudyRatings | None = None) -> dict:
    """{"aggregation": ..., "agreement_detail": ...} for the study's report."""
    ratings = ratings or study_ratings(study)
    judgments = len(set(ratings.judgment.tolist()))
    small = judgments <= settings.MARGINALIA_REPORT_COMPETENCE_JUDGMENTS
    methods = [method for method in LABEL_METHODS if small or method in ALWAYS_FITTED]
    fits = {method: fit(ratings, method, study.seed) for method in methods}
    aggregation = report_section(ratings, fits, study.seed)
    aggregation["left_out"] = {
        method: f"{judgments} judgments, more than MARGINALIA_REPORT_COMPETENCE_JUDGMENTS "
        f"({settings.MARGINALIA_REPORT_COMPETENCE_JUDGMENTS}); aggregate_labels fits it"
        for method in LABEL_METHODS
        if method not in fits
    }
    detail = agreement_detail(
        ratings,
        {method: fits[method] for method in ALWAYS_FITTED},
        gold_label_pairs(study),
        alerts.batch_size(study),
    )
    return {"aggregation": aggregation, "agreement_detail": detail}


def recheck_agreement(study: Study) -> dict | None:
    """The worker's check between reports: when the study's counted judgments grew by its batch
    size since the last check, compute the study's and annotators' agreement and check them
    against the thresholds. None when not due."""
    watch = alerts.watch_of(study)
    judgments = counted_judgments(study).count()
    if watch.pk is None or judgments - watch.checked_judgments < watch.batch_size:
        return None
    ratings = study_ratings(study)
    overall = study_agreement(ratings)
    figures = alerts.Figures(
        judgments=judgments,
        study_value=overall["value"],
        study_units=overall["units"],
        annotators={
            name: (entry["cohen_kappa"], entry["pairs"]) for name, entry in annotator_agreement(ratings).items()
        },
    )
    return alerts.check(study, figures)
