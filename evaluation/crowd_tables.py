"""The report page's tables on the annotators as a crowd, from the report payload's `aggregation`
and `agreement_detail` (evaluation.crowd_report): plain rows for the templates, numbers
formatted here so the templates stay free of logic."""

from __future__ import annotations

from evaluation import charts

MANY_BATCHES = 60  # above this the batch table is folded away; the chart shows them all


def _number(value, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _share(value) -> str:
    return "–" if value is None else f"{value:.1%}"


def competence_rows(report: dict) -> dict:
    """One row per annotator with each fitted method's competence, and one row per method with
    how many items it labels differently from the majority (and, proxy, its accuracy vs gold)."""
    section = report["aggregation"]
    methods = list(section["methods"])
    names = sorted({name for entry in section["methods"].values() for name in entry["competence"]})
    return {
        "methods": methods,
        "annotators": [
            {
                "annotator": name,
                "cells": [_number(section["methods"][method]["competence"].get(name)) for method in methods],
            }
            for name in names
        ],
        "summary": [
            {
                "method": method,
                "items": entry["items"],
                "changed": entry["changed_from_majority"],
                "accuracy_vs_gold": _share(entry.get("accuracy_vs_gold")) if "accuracy_vs_gold" in entry else None,
            }
            for method, entry in section["methods"].items()
        ],
        "changed": {
            method: [
                {
                    "item": change["item"],
                    "majority": change["majority"],
                    "label": change["label"],
                    "posterior": ", ".join(f"{key}: {value:.2f}" for key, value in change["posterior"].items()),
                }
                for change in entry["changed_items"]
            ]
            for method, entry in section["methods"].items()
            if entry["changed_items"]
        },
        "left_out": section.get("left_out", {}),
    }


def agreement_tables(report: dict) -> dict:
    """Per annotator, per label and over time, as rows; and the over-time chart."""
    detail = report["agreement_detail"]
    values = detail["values"]
    annotators = [
        {
            "annotator": name,
            "judgments": entry["judgments"],
            "pairs": entry["vs_others"]["pairs"],
            "kappa_others": _number(entry["vs_others"]["cohen_kappa"]),
            "agreement_others": _share(entry["vs_others"]["percent_agreement"]),
            "gold_units": entry["vs_gold"]["units"],
            "gold_accuracy": _share(entry["vs_gold"]["agreement"]),
            "kappa_gold": _number(entry["vs_gold"]["cohen_kappa"]),
            "aggregates": [
                (
                    method,
                    _share(entry["vs_aggregate"][method]["agreement"]),
                    _number(entry["vs_aggregate"][method]["cohen_kappa"]),
                )
                for method in entry["vs_aggregate"]
            ],
        }
        for name, entry in detail["annotators"].items()
    ]
    labels = detail["labels"]
    per_label = [
        {
            "value": value,
            "given": figures["given"],
            "majority": figures["majority"],
            "specific": _number(figures["specific_agreement"]),
            "precision": _share(figures["precision_vs_majority"]),
            "recall": _share(figures["recall_vs_majority"]),
        }
        for value, figures in labels["labels"].items()
    ]

    def confusion(table):
        return [{"value": value, "counts": row} for value, row in zip(values, table, strict=True)]

    over_time = detail["over_time"]
    windows = over_time["by_batch"]
    return {
        "study": detail["study"],
        "aggregate_methods": list(next(iter(detail["annotators"].values()))["vs_aggregate"]) if annotators else [],
        "annotators": annotators,
        "values": values,
        "labels": per_label,
        "vs_majority": confusion(labels["vs_majority"]),
        "pairs": confusion(labels["pairs"]),
        "vs_gold": confusion(labels["vs_gold"]) if "vs_gold" in labels else None,
        "by_day": [_window_row(row, row["day"]) for row in over_time["by_day"]],
        "by_batch": [_window_row(row, row["batch"]) for row in windows],
        "batch_size": over_time["batch_size"],
        "fold_batches": len(windows) > MANY_BATCHES,
        "alpha_level": over_time["alpha_level"],
        "chart": (
            charts.agreement_over_time_svg(windows, f"Agreement by batch of {over_time['batch_size']} judgments")
            if len(windows) > 1
            else None
        ),
    }


def _window_row(row: dict, name) -> dict:
    return {
        "name": name,
        "first": row["first"][:16].replace("T", " "),
        "last": row["last"][:16].replace("T", " "),
        "judgments": row["judgments"],
        "annotators": row["annotators"],
        "pairs": row["pairs"],
        "agreement": _share(row["percent_agreement"]),
        "kappa": _number(row["cohen_kappa"]),
        "completed": row["completed_units"],
        "alpha": _number(row["krippendorff_alpha"]),
    }
