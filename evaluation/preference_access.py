"""Asking for a preference study's results from a page, the API or a command: the scores per
query, their qrels, the human ranking stored as a run, and runs compared with it.

Every process loads the URLconf at start, so pages and the API import this module and not the
modules that compute: evaluation.preference_scores and evaluation.compatibility load choix and
scipy.stats (over a second). They are named here by dotted path and load in the process that
first asks (as evaluation.reports does for the study reports)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.utils.module_loading import import_string

from annotation.models import Study
from retrieval.errors import InputError
from retrieval.input_rules import parse_id
from retrieval.models import Run
from retrieval.selectors import get_run

PREFERENCE_SCORES = "evaluation.preference_scores.preference_scores"
PREFERENCE_QRELS = "evaluation.preference_scores.preference_qrels"
SAVE_HUMAN_RUN = "evaluation.preference_scores.save_human_run"
COMPARE = "evaluation.compatibility.compare_with_preferences"


def scores(study: Study, **options) -> dict:
    """evaluation.preference_scores.preference_scores: per query scores, ranking and intervals."""
    return import_string(PREFERENCE_SCORES)(study, **options)


def qrels_lines(study: Study, **options) -> list[str]:
    """The study's preference qrels as TREC lines `qid 0 docid grade` (no intervals computed)."""
    report = scores(study, **{**options, "resamples": 0})
    return [f"{query} 0 {passage} {grade}" for query, passage, grade in import_string(PREFERENCE_QRELS)(report)]


def human_run(study: Study, name: str | None = None, **options) -> Run:
    """The human ranking stored as a run of kind "human" (one transaction)."""
    report = scores(study, **{**options, "resamples": 0})
    with transaction.atomic():
        return import_string(SAVE_HUMAN_RUN)(study, report, name)


def compare(study: Study, run_ids: Sequence, **options) -> dict:
    """Each run's compatibility with the study's preference qrels and Kendall's tau against its
    human scores (evaluation.compatibility)."""
    if not run_ids:
        raise InputError("name at least one run", field="runs")
    ids = [parse_id(str(run_id)) for run_id in run_ids]
    if None in ids:
        raise InputError(f"not a run id: {run_ids[ids.index(None)]!r}", field="runs")
    runs = [get_run(run_id, field="runs") for run_id in dict.fromkeys(ids)]
    return import_string(COMPARE)(study, runs, **options)


def requested_ids(text: str) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


MAX_RESAMPLES = 2000


def options_from(params) -> dict:
    """The scoring options a page or the API was given (`model`, `alpha`, `intervals`, `seed`),
    checked: InputError names the parameter. Intervals only when asked for: each resample refits
    every query (tens of milliseconds a query), too slow to do unasked inside a request."""
    options = {"resamples": 0}
    if params.get("model"):
        options["model"] = params["model"]
    if params.get("alpha") not in (None, ""):
        options["alpha"] = _number(params["alpha"], float, "alpha")
    if params.get("intervals") not in (None, ""):
        options["resamples"] = _number(params["intervals"], int, "intervals", high=MAX_RESAMPLES)
    if params.get("seed") not in (None, ""):
        options["seed"] = _number(params["seed"], int, "seed", high=2**31 - 1)
    return options


def comparison_from(params) -> dict:
    """Compatibility's `p` and `depth` as given (checked by evaluation.compatibility)."""
    options = {}
    if params.get("p") not in (None, ""):
        options["persistence"] = _number(params["p"], float, "p")
    if params.get("depth") not in (None, ""):
        options["depth"] = _number(params["depth"], int, "depth", high=100_000)
    return options


def _number(text, kind, field: str, high: int | None = None):
    try:
        value = kind(str(text).strip())
    except ValueError:
        raise InputError(f"must be a number, got {text!r}", field=field) from None
    if kind is float and not (value == value and abs(value) != float("inf")):
        raise InputError(f"must be a finite number, got {text!r}", field=field)
    if kind is int and not 0 <= value <= (high if high is not None else 2**31 - 1):
        raise InputError(f"must be between 0 and {high}, got {value}", field=field)
    return value
