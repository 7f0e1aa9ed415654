"""Reads for the staff pages that join apps: a run's page (its report as table rows, the recall
curve's points, one row per query with the gold's rank) and the parts of a study's page that the
annotation app's staff selectors do not give (item text, answers with rationales and marked
excerpts, per-annotator progress). Staff only: these show gold, provenance and who answered."""

from __future__ import annotations

import statistics
from collections import defaultdict

from django.core.paginator import Paginator
from django.db.models import Count, Q

from annotation.label_schema import study_schema
from annotation.models import AnnotatorFlag, Assignment, Item, Judgment, Study
from annotation.selectors import query_display_text, span_target_text
from annotation.ui_selectors import staff_study_items
from retrieval.metrics import METRICS, RECALL_CUTOFFS, run_metrics
from retrieval.models import Run, RunQuery

QUERIES_PER_PAGE = 100
PREVIEW_CHARACTERS = 160


# --- runs ----------------------------------------------------------------------------------------


def metric_rows(summary: dict) -> list[dict]:
    """One row per metric of an evaluate_run summary: name, mean and standard error."""
    return [
        {"name": name, "value": summary["metrics"].get(name), "stderr": summary["stderr"].get(name)}
        for name in METRICS
        if name in summary["metrics"]
    ]


def recall_points(summary: dict) -> list[dict]:
    """recall@k at each cutoff with its standard error: the points of the run page's plot."""
    return [
        {"k": k, "value": summary["metrics"][f"recall@{k}"], "stderr": summary["stderr"].get(f"recall@{k}")}
        for k in RECALL_CUTOFFS
        if summary["metrics"].get(f"recall@{k}") is not None
    ]


def query_preview(query) -> str:
    """A query in one short line: its text, or the context around its masked quotation."""
    around = [*query.left_context[-1:], "[…]", *query.right_context[:1]]
    text = " ".join(around) if query.has_context else query.text
    return text if len(text) <= PREVIEW_CHARACTERS else text[: PREVIEW_CHARACTERS - 1] + "…"


def run_query_rows(run: Run, page_number) -> tuple[list[dict], object]:
    """One page of the run's queries in collection order: preview, quote length, candidate-set
    size, relevant passages and the rank of the best-ranked one (None: no relevant passage)."""
    results = RunQuery.objects.filter(run=run).select_related("query").order_by("query__ordinal", "query_id")
    page = Paginator(results, QUERIES_PER_PAGE).get_page(page_number)
    rows = [
        {
            "query": result.query,
            "preview": query_preview(result.query),
            "candidates": result.candidates,
            "relevant": len(result.relevant_ranks),
            "gold_rank": min(result.relevant_ranks.values(), default=None),
        }
        for result in page
    ]
    return rows, page


def by_length_table(by_quote_length: dict) -> dict:
    """evaluate_run's `by_quote_length` turned for the page: one column per quote length (with
    its number of queries), one row per metric with each length's mean and standard error."""
    lengths = [{"length": length, "queries": summary["queries"]} for length, summary in by_quote_length.items()]
    rows = [
        {"name": name, "cells": [metric_rows(summary)[index] for summary in by_quote_length.values()]}
        for index, name in enumerate(METRICS)
    ]
    return {"lengths": lengths, "by_length": rows if lengths else []}


def run_page(run: Run, page_number=1) -> dict:
    report = run_metrics(run)
    rows, page = run_query_rows(run, page_number)
    return {
        "report": report,
        "metrics": metric_rows(report) if report else [],
        "recall": recall_points(report) if report else [],
        **by_length_table((report or {}).get("by_quote_length", {})),
        "query_rows": rows,
        "query_page": page,
    }


# --- studies -------------------------------------------------------------------------------------


def study_facts(study: Study) -> dict:
    """What a label study asks (question, scale with its names, spans, rationale) and where its
    items came from (source runs, depth, pools); empty for a proxy study."""
    if study.kind == Study.Kind.PROXY:
        return {}
    schema = study_schema(study)
    runs = Run.objects.filter(pk__in=study.parameters.get("runs") or []).select_related("retriever")
    return {
        "question": schema["question"],
        "scale": schema["scale"],
        "values": [{"value": value, "label": schema["value_labels"].get(str(value), "")} for value in schema["values"]],
        "multi_select": schema["multi_select"],
        "spans": schema["spans"],
        "rationale": schema["rationale"],
        "source_runs": list(runs),
        "depth": study.parameters.get("depth"),
        "use_pools": study.parameters.get("use_pools"),
    }


def study_item_rows(study: Study) -> list[dict]:
    """staff_study_items with what the annotators read (the item's text as shown to them) and,
    for each answer, its rationale and the excerpts its spans marked."""
    texts: dict[tuple[int, str], str] = {}

    def target_text(item: Item, target: str) -> str:
        if (item.pk, target) not in texts:
            texts[item.pk, target] = span_target_text(study, item, target)
        return texts[item.pk, target]

    rows = staff_study_items(study)
    for row in rows:
        item = row["item"]
        row["text"] = query_display_text(item.query, study.context_left, study.context_right)
        for entry in row["judgments"]:
            entry["excerpts"] = [
                target_text(item, span["target"])[span["start"] : span["end"]] for span in entry["judgment"].spans
            ]
    return rows


def annotator_rows(study: Study) -> list[dict]:
    """Per annotator who was allowed, claimed or answered: counted judgments done, items still
    open to them (formal items they have not answered that still need answers), median seconds,
    open quality flags and when they last submitted or claimed."""
    formal = Item.objects.filter(study=study).exclude(role=Item.Role.QUALIFICATION)
    open_items = set(
        formal.annotate(live=Count("judgments", filter=Q(judgments__voided=False)))
        .filter(live__lt=study.judgments_per_item)
        .values_list("pk", flat=True)
    )
    judged = defaultdict(set)
    seconds = defaultdict(list)
    last = {}
    people = {}
    for judgment in Judgment.objects.filter(item__study=study).select_related("annotator"):
        people[judgment.annotator_id] = judgment.annotator
        judged[judgment.annotator_id].add(judgment.item_id)
        if not judgment.voided and judgment.seconds is not None:
            seconds[judgment.annotator_id].append(judgment.seconds)
        _seen(last, judgment.annotator_id, judgment.submitted_at)
    for assignment in Assignment.objects.filter(item__study=study).select_related("annotator"):
        people.setdefault(assignment.annotator_id, assignment.annotator)
        _seen(last, assignment.annotator_id, assignment.claimed_at)
    for annotator in study.annotators.all():
        people.setdefault(annotator.pk, annotator)
    flags = dict(
        AnnotatorFlag.objects.filter(study=study, resolved_at__isnull=True)
        .values_list("annotator")
        .annotate(n=Count("pk"))
    )
    done = dict(Judgment.objects.filter(item__in=formal, voided=False).values_list("annotator").annotate(n=Count("pk")))
    return [
        {
            "annotator": person,
            "done": done.get(pk, 0),
            "remaining": len(open_items - judged[pk]),
            "median_seconds": statistics.median(seconds[pk]) if seconds[pk] else None,
            "flags": flags.get(pk, 0),
            "last_active": last.get(pk),
        }
        for pk, person in sorted(people.items(), key=lambda pair: pair[1].username)
    ]


def _seen(last: dict, annotator_id: int, when) -> None:
    last[annotator_id] = max(last.get(annotator_id, when), when)
