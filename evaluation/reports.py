"""Asking for evaluation's results from a page or the API: a study's report (the cached one, one
computed now for a small study, or a job for a large one), a relevance study's qrels, a
comparison of runs, a leaderboard and a collection's bundle.

Every process loads the URLconf at start (the system checks before each management command,
each Celery worker, each web worker), so the views import this module and not the modules that
compute: evaluation.services, evaluation.qrels and evaluation.comparison load scipy.stats and
statsmodels (over a second). They are named here by dotted path, as Celery tasks are, and load
in the process that first asks for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, BinaryIO

from celery import signature
from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from annotation.models import Study
from evaluation import alerts
from evaluation.models import StudyReport
from evaluation.selectors import report_fingerprint
from jobs.models import Job
from jobs.services import create_job, dispatch
from judges.models import Judge
from retrieval.errors import InputError
from retrieval.input_rules import parse_integer
from retrieval.models import Collection, Run
from retrieval.qrels_sources import Qrels
from retrieval.selectors import get_run, require_done

if TYPE_CHECKING:
    from evaluation.qrels import QrelsExport

REPORT_JOB_KIND = "report"
# By name: evaluation.tasks imports evaluation.services.
REPORT_TASK = "evaluation.tasks.compute_study_report"
STUDY_REPORT = "evaluation.services.study_report"
RELEVANCE_QRELS = "evaluation.qrels.relevance_qrels"
COMPARE_RUNS = "evaluation.comparison.compare_runs"
LEADERBOARD = "evaluation.leaderboard.leaderboard"
BUNDLE_ARCHIVE = "evaluation.bundles.bundle_archive"
STUDY_AGGREGATION = "evaluation.label_aggregation.study_aggregation"
SOFT_LABEL_ROWS = "evaluation.label_aggregation.soft_label_rows"


def requested_run_ids(values: Iterable[str]) -> list[str]:
    """Run ids from query parameters that may repeat (?model_run=1&model_run=2) or hold a comma
    list (?model_run=1,2)."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def resolve_model_runs(study: Study, run_ids: Iterable[int | str]) -> list[Run]:
    """The runs to compare with the humans, in id order; each must exist and rank the study's
    collection."""
    ids = set()
    for raw_id in run_ids:
        try:
            ids.add(int(raw_id))
        except (TypeError, ValueError):
            raise InputError(f"run id {raw_id!r} is not a number", field="model_run") from None
    runs = []
    for run_id in sorted(ids):
        run = require_done(get_run(run_id, field="model_run"), field="model_run")
        if run.collection_id != study.collection_id:
            raise InputError(
                f"run {run.pk} ranks collection {run.collection_id}, but study {study.pk} uses collection "
                f"{study.collection_id}",
                field="model_run",
            )
        runs.append(run)
    return runs


def runs_key(model_runs: Sequence[Run]) -> str:
    return ",".join(str(run.pk) for run in sorted(model_runs, key=lambda run: run.pk))


def stored_payload(study: Study, model_runs: Sequence[Run], fingerprint: str) -> dict | None:
    """The report stored under `fingerprint`, else None (the fingerprint reads every judgment,
    item and candidate of the study, so a caller that needs it again computes it once)."""
    stored = StudyReport.objects.filter(study=study, model_runs_key=runs_key(model_runs), fingerprint=fingerprint)
    return stored.values_list("payload", flat=True).first()


def _computed_and_stored(study: Study, model_runs: Sequence[Run], fingerprint: str) -> dict:
    """A fresh report, stored; its agreement figures are checked against the study's thresholds
    (evaluation.alerts) in the same transaction."""
    payload = import_string(STUDY_REPORT)(study, model_runs)
    with transaction.atomic():
        StudyReport.objects.update_or_create(
            study=study, model_runs_key=runs_key(model_runs), defaults={"fingerprint": fingerprint, "payload": payload}
        )
        if alerts.watched(study):
            alerts.check(study, alerts.figures_from_report(payload))
    return payload


def cached_study_report(study: Study, model_runs: Sequence[Run] = ()) -> dict:
    """The stored report when its inputs are unchanged, else a fresh one (stored for next time).
    The fingerprint is computed once, and evaluation.services (scipy, statsmodels: over a second
    to load) only on a miss: `study_report` answering from the cache loads neither."""
    fingerprint = report_fingerprint(study, model_runs)
    stored = stored_payload(study, model_runs, fingerprint)
    return stored if stored is not None else _computed_and_stored(study, model_runs, fingerprint)


def study_report_or_job(study: Study, model_runs: Sequence[Run] = (), user=None) -> tuple[dict | None, Job | None]:
    """(report, None) when the cached report is fresh or the study is small enough to compute it
    within a request; otherwise (None, job): a "report" job on the cpu queue computes and caches
    it (one job per study and runs at a time), so pages and the API stay interactive."""
    fingerprint = report_fingerprint(study, model_runs)
    stored = stored_payload(study, model_runs, fingerprint)
    if stored is not None:
        return stored, None
    if study.items.count() < settings.MARGINALIA_REPORT_JOB_ITEMS:
        return _computed_and_stored(study, model_runs, fingerprint), None
    key = runs_key(model_runs)
    with transaction.atomic():
        job = Job.objects.filter(
            kind=REPORT_JOB_KIND,
            status__in=[Job.Status.PENDING, Job.Status.RUNNING],
            parameters__study=study.pk,
            parameters__model_runs=key,
        ).first()
        if job is None:
            job = create_job(REPORT_JOB_KIND, "cpu", {"study": study.pk, "model_runs": key}, user=user)
            # By name: evaluation.tasks imports this module.
            dispatch(job, signature(REPORT_TASK), study.pk, [run.pk for run in model_runs])
    return None, job


def relevance_qrels(
    study: Study, aggregate: str = "majority", source: str = "humans", judge: Judge | None = None
) -> QrelsExport:
    """evaluation.qrels.relevance_qrels: the study's aggregated labels as TREC qrels."""
    return import_string(RELEVANCE_QRELS)(study, aggregate, source, judge)


def requested_seed(value: str | None) -> int | None:
    """`?seed=` as a whole number, or None for the study's seed."""
    if value is None or value == "":
        return None
    return parse_integer(value.strip(), field="seed")


def study_aggregation(study: Study, method: str, seed: int | None = None) -> dict:
    """evaluation.label_aggregation.study_aggregation: one label per item by `method`, with the
    annotators' competence and the items' posteriors."""
    return import_string(STUDY_AGGREGATION)(study, method, seed)


def soft_label_rows(study: Study, method: str, seed: int | None = None) -> Iterator[dict]:
    """evaluation.label_aggregation.soft_label_rows: every aggregated item with its posterior."""
    return import_string(SOFT_LABEL_ROWS)(study, method, seed)


def compare_runs(run_ids: Sequence, metrics: str | Sequence[str] | None = None, qrels: str | None = None) -> dict:
    """evaluation.comparison.compare_runs: the runs' metrics, standard errors and paired tests."""
    return import_string(COMPARE_RUNS)(run_ids, metrics, qrels=qrels)


def leaderboard(collection: Collection, run_ids: Sequence, **options) -> dict:
    """evaluation.leaderboard.leaderboard: the runs ranked under one qrels source."""
    return import_string(LEADERBOARD)(collection, run_ids, **options)


def bundle_archive(collection: Collection, qrels: Qrels) -> BinaryIO:
    """evaluation.bundles.bundle_archive: the collection's bundle as a zip in a temporary file."""
    return import_string(BUNDLE_ARCHIVE)(collection, qrels)
