"""A preference study's report as rows for the report page and as plain text for study_report."""

from __future__ import annotations

from evaluation.formatting import _text_table


def _number(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def preference_summary_line(report: dict) -> str:
    study, answers = report["study"], report["answers"]
    design = study["design"]
    plan = design.get("design", "")
    if design.get("rule"):
        plan += f" ({design['rule']}" + (f", budget {design['budget']}" if design.get("budget") else "") + ")"
    return (
        f'Study {study["id"]} "{study["name"]}": {study["shape"]} preferences, design {plan}; {report["items"]} items, '
        f"{report['judgments']} counted answers ({answers.get('strict', 0)} strict, {answers.get('tie', 0)} with ties, "
        f"{answers.get('both_bad', 0)} both bad). Scores: {report['model']}, alpha {report['alpha']}, "
        + (
            f"{100 * report['intervals']['level']:.0f}% {report['intervals']['method']} "
            f"({report['intervals']['resamples']} resamples, seed {report['intervals']['seed']})."
            if report["intervals"]["resamples"]
            else "No intervals here (preference_scores --intervals N computes them)."
        )
    )


def agreement_rows(report: dict) -> list[dict]:
    agreement = report["agreement"]
    rows = [
        {"statistic": "pairs decided", "value": agreement["units"]},
        {"statistic": "pairs decided by several annotators", "value": agreement["units_with_several_annotators"]},
        {"statistic": "pairwise agreement", "value": _number(agreement["agreement"])},
        {"statistic": "Krippendorff's alpha (nominal)", "value": _number(agreement["krippendorff_alpha"])},
    ]
    rows += [
        {"statistic": f"agreement {names} ({entry['pairs']} pairs)", "value": _number(entry["agreement"])}
        for names, entry in agreement["by_annotators"].items()
    ]
    return rows


def intransitivity_rows(report: dict) -> list[dict]:
    return [
        {
            "annotator": name,
            "triples": entry["triples"],
            "intransitive": entry["intransitive"],
            "share": _number(entry["share"]),
        }
        for name, entry in report["intransitivity"].items()
    ]


def model_rows(report: dict) -> list[dict]:
    return [
        {
            "run": run_id,
            "name": entry["name"],
            "compatibility": _number(entry["compatibility"]),
            "kendall_tau": _number(entry["kendall_tau"]),
        }
        for run_id, entry in report["models"].items()
    ]


def judge_rows(report: dict) -> list[dict]:
    return [
        {
            "judge": f"{entry['judge']} v{entry['version']}",
            "backend": entry["backend"],
            "answers": entry["answers"],
            "failed": entry["failed"],
            "items": entry["vs_majority"]["items"],
            "agreement": _number(entry["vs_majority"]["agreement"]),
            "kappa": _number(entry["vs_majority"]["cohen_kappa"]),
            "tau": _number(entry["ranking_tau"]),
            "parted": len(entry["humans_agree_judge_differs"]),
        }
        for entry in report["judges"].values()
    ]


def query_tables(report: dict) -> list[dict]:
    """Per query: its ranking with scores, intervals, wins and comparisons."""
    tables = []
    for query, section in report["queries"].items():
        rows = [
            {
                "place": place,
                "passage": passage,
                "score": _number(section["scores"][passage]),
                "interval": (
                    f"{_number(section['intervals'][passage][0])} … {_number(section['intervals'][passage][1])}"
                    if passage in section["intervals"]
                    else "—"
                ),
                "wins": section["wins"][passage],
                "comparisons": section["comparisons"].get(passage, 0),
                "both_bad": _number(section["both_bad"].get(passage), 2),
            }
            for place, passage in enumerate(section["ranking"], start=1)
        ]
        tables.append({"query": query, "judgments": section["judgments"], "rows": rows})
    return tables


def system_rows(report: dict) -> list[dict]:
    return [
        {
            "system": name,
            "run": entry["run"],
            "score": _number(entry["score"]),
            **{k: entry[k] for k in ("wins", "ties", "losses")},
        }
        for name, entry in report.get("systems", {}).items()
    ]


QUERY_COLUMNS = [
    ("place", "#"),
    ("passage", "passage"),
    ("score", "score"),
    ("interval", "95% interval"),
    ("wins", "wins"),
    ("comparisons", "answers"),
    ("both_bad", "both bad"),
]


def preference_report_as_text(report: dict) -> str:
    sections = [
        preference_summary_line(report),
        _text_table("Agreement", agreement_rows(report), [("statistic", "statistic"), ("value", "value")]),
        _text_table(
            "Intransitive triples",
            intransitivity_rows(report),
            [("annotator", "annotator"), ("triples", "triples"), ("intransitive", "intransitive"), ("share", "share")],
        ),
        _text_table(
            "Runs against the human ranking",
            model_rows(report),
            [("run", "run"), ("name", "name"), ("compatibility", "compatibility"), ("kendall_tau", "Kendall tau")],
        ),
        _text_table(
            "Judges on the same pairs",
            judge_rows(report),
            [
                ("judge", "judge"),
                ("answers", "answers"),
                ("failed", "failed"),
                ("items", "items with a majority"),
                ("agreement", "agreement"),
                ("kappa", "Cohen kappa"),
                ("tau", "ranking tau"),
                ("parted", "humans agree, judge differs"),
            ],
        ),
    ]
    if report.get("systems"):
        sections.append(
            _text_table(
                "Systems (answers pooled over queries)",
                system_rows(report),
                [("system", "system"), ("score", "score"), ("wins", "wins"), ("ties", "ties"), ("losses", "losses")],
            )
        )
    for table in query_tables(report):
        sections.append(
            _text_table(f"Query {table['query']} ({table['judgments']} answers)", table["rows"], QUERY_COLUMNS)
        )
    return "\n\n".join(sections)
