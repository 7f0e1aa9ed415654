"""Study reports as rows for people: the staff page and the command's text output show the same
tables, built here from the report's JSON payload."""

from __future__ import annotations

AGREEMENT_STATISTICS = (
    ("fleiss_kappa", "Fleiss kappa (category = the candidate chosen)", "kappa"),
    ("randolph_kappa", "Randolph free-marginal kappa", "kappa"),
    ("all_agree", "All annotators agree", "share"),
    ("none_agree", "No two annotators agree", "share"),
    ("majority_accuracy", "Majority chose the gold", "share"),
)


def format_value(value: float | None, style: str = "share") -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}%" if style == "share" else f"{value:.3f}"


def format_interval(interval: dict | None, style: str = "share") -> str:
    if interval is None:
        return "n/a"
    return f"[{format_value(interval['low'], style)}, {format_value(interval['high'], style)}]"


def format_p_value(p_value: float | None) -> str:
    return "n/a" if p_value is None else f"{p_value:.3g}"


def agreement_rows(report: dict) -> list[dict]:
    random = report["random_baseline"]
    return [
        {
            "statistic": label,
            "value": format_value(report[key], style),
            "interval": format_interval(report["confidence_intervals"][key], style),
            "random": format_value(random[key], style),
        }
        for key, label, style in AGREEMENT_STATISTICS
    ]


def annotator_rows(report: dict) -> list[dict]:
    gold = report["gold_accuracy"]
    return [
        {
            "annotator": name,
            "judgments": tally["judgments"],
            "correct": tally["correct"],
            "accuracy": format_value(tally["accuracy"]),
            "gold": f"{gold[name]['correct']}/{gold[name]['judgments']}" if name in gold else "n/a",
        }
        for name, tally in report["annotators"].items()
    ]


def model_rows(report: dict) -> list[dict]:
    rows = []
    for run_id, model in report["models"].items():
        row = {"run": run_id, "name": model["name"], "accuracy": format_value(model["accuracy"])}
        if model["comparable"]:
            test = model["mcnemar"]
            row.update(
                interval=format_interval(model["confidence_interval"]),
                coverage=f"{model['covered_items']}/{model['items']} ({format_value(model['coverage'])})",
                p_value=format_p_value(test["p_value"]),
                note=(
                    f"vs human majority on {test['paired_items']} items: model alone right "
                    f"{test['model_only_correct']}, humans alone right {test['humans_only_correct']}"
                ),
            )
        else:
            row.update(interval="n/a", coverage="n/a", p_value="n/a", note=f"not comparable: {model['reason']}")
        rows.append(row)
    return rows


def _position(value: int) -> str:
    """Display positions count from 1 for people; the JSON keeps the stored 0-based ones."""
    return f"option {value + 1}"


def error_rows(entries: list[dict], chosen_key: str) -> list[dict]:
    """Items for error analysis: which option was gold and which one was chosen instead."""
    return [
        {
            "item": entry["item"],
            "query": entry["query"],
            "gold": f"{_position(entry['gold'])} ({entry['gold_passage']})",
            "chosen": _position(entry[chosen_key]),
            "votes": " / ".join(str(count) for count in entry["votes"]),
        }
        for entry in entries
    ]


def summary_line(report: dict) -> str:
    excluded = report["excluded_items"]
    study = report["study"]
    return (
        f'Study {study["id"]} "{study["name"]}": {report["items"]} items, {report["complete_items"]} with '
        f"{study['judgments_per_item']} judgments ({len(excluded['incomplete'])} incomplete, "
        f"{len(excluded['over_judged'])} over-judged, {len(excluded['without_gold'])} without gold excluded), "
        f"{report['judgments']} counted judgments, {study['candidates_per_item']} options per item."
    )


def method_line(report: dict) -> str:
    confidence = report["confidence"]
    return (
        f"Intervals: {100 * confidence['level']:.0f}% {confidence['method']} ({confidence['resamples']} resamples, "
        f"seed {confidence['seed']}); random: the central {100 * confidence['level']:.0f}% of a random guesser's "
        f"accuracy on as many items. Computed {report['computed_at'][:19].replace('T', ' ')} UTC."
    )


# --- position effect (evaluation.positions) --------------------------------------------------------

POSITION_COLUMNS = {
    "proxy": [
        ("place", "position shown"),
        ("shown", "judgments"),
        ("chosen", "chosen"),
        ("rate", "choice rate"),
        ("expected", "expected"),
        ("gold_shown", "gold shown here"),
    ],
    "selections": [
        ("place", "position shown"),
        ("shown", "shown"),
        ("selected", "selected"),
        ("rate", "selection rate"),
    ],
}
ORDER_WORDS = {
    "item": "every annotator saw the item's own order, so position and content go together",
    "annotator": "each annotator saw an order of their own",
}


def position_rows(report: dict) -> list[dict]:
    """The position effect's table, one row per place shown (1 = first), for the page and text."""
    effect = report.get("position_effect")
    if not effect:
        return []
    return [
        {
            **row,
            "place": row["position"] + 1,
            "rate": format_value(row["rate"]),
            **({"expected": f"{row['expected']:.1f}"} if "expected" in row else {}),
        }
        for row in effect["positions"]
    ]


def position_line(report: dict) -> str | None:
    """The test of no position effect in words."""
    effect = report.get("position_effect")
    if not effect:
        return None
    statistic = "n/a" if effect["chi_square"] is None else f"{effect['chi_square']:.2f}"
    unknown = f"; {effect['order_unknown']} without a recorded order left out" if effect["order_unknown"] else ""
    return (
        f"{effect['test']}: chi-square {statistic}, df {effect['df'] if effect['df'] is not None else 'n/a'}, "
        f"p {format_p_value(effect['p_value'])} over {effect['judgments']} judgments{unknown}; "
        f"{ORDER_WORDS.get(effect['candidate_order'], effect['candidate_order'])}."
    )


def _position_section(report: dict) -> list[str]:
    """The text report's position section (none for single-passage label studies)."""
    effect = report.get("position_effect")
    if not effect:
        return []
    columns = POSITION_COLUMNS["proxy" if report["study"]["kind"] == "proxy" else "selections"]
    return [_text_table("Choices by position shown", position_rows(report), columns) + "\n" + position_line(report)]


def _text_table(title: str, rows: list[dict], columns: list[tuple[str, str]]) -> str:
    header = [label for _, label in columns]
    body = [[str(row[key]) for key, _ in columns] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(header, *body)]

    def line(cells):
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    lines = [title, line(header), line(["-" * width for width in widths])]
    lines += [line(cells) for cells in body] or ["(none)"]
    return "\n".join(lines)


def report_as_text(report: dict) -> str:
    """The whole report of either kind as plain-text tables (the command's output without --json)."""
    if report["study"]["kind"] == "proxy":
        return proxy_report_as_text(report)
    return label_report_as_text(report)


def proxy_report_as_text(report: dict) -> str:
    """A proxy study's report as plain-text tables."""
    level = f"{100 * report['confidence']['level']:.0f}% CI"
    sections = [
        summary_line(report) + "\n" + method_line(report),
        _text_table(
            "Agreement and human accuracy",
            agreement_rows(report),
            [("statistic", "statistic"), ("value", "value"), ("interval", level), ("random", "random annotators")],
        ),
        _text_table(
            "Annotators",
            annotator_rows(report),
            [
                ("annotator", "annotator"),
                ("judgments", "judgments"),
                ("correct", "correct"),
                ("accuracy", "accuracy"),
                ("gold", "hidden gold correct"),
            ],
        ),
        _text_table(
            "Models",
            model_rows(report),
            [
                ("run", "run"),
                ("name", "name"),
                ("accuracy", "accuracy"),
                ("interval", level),
                ("coverage", "coverage"),
                ("p_value", "McNemar p"),
                ("note", ""),
            ],
        ),
        _text_table(
            "Items where all annotators chose the same wrong option",
            error_rows(report["error_analysis"]["unanimous_non_gold"], "chosen"),
            [("item", "item"), ("query", "query"), ("gold", "gold"), ("chosen", "chosen"), ("votes", "votes")],
        ),
    ]
    sections += _position_section(report)
    sections.append(_text_table("Judges on the same items", proxy_judge_rows(report), PROXY_JUDGE_COLUMNS))
    for run_id, entries in report["error_analysis"]["humans_agree_model_fails"].items():
        sections.append(
            _text_table(
                f"Items where all annotators chose the gold and run {run_id} did not",
                error_rows(entries, "model_answer"),
                [("item", "item"), ("query", "query"), ("gold", "gold"), ("chosen", "model's answer")],
            )
        )
    return "\n\n".join(sections)


# --- relevance and quotability reports ----------------------------------------------------------

KAPPA_LABELS = {"unweighted": "unweighted", "linear": "linear weights", "quadratic": "quadratic weights"}


def _label_name(report: dict, value) -> str:
    name = report["study"]["value_labels"].get(str(value))
    return f"{value} ({name})" if name and name != str(value) else str(value)


def label_summary_line(report: dict) -> str:
    study = report["study"]
    unit = "paragraphs" if study["multi_select"] else "items"
    return (
        f'Study {study["id"]} "{study["name"]}" ({study["kind"]}, {study["scale"]} scale): {report["items"]} items, '
        f"{report['judged_items']} judged, {report['complete_items']} with {study['judgments_per_item']} judgments; "
        f"{report['judgments']} counted judgments on {report['units']} {unit}; "
        f"{report['ties']} majority ties, {report['adjudicated']} adjudicated."
    )


def label_agreement_rows(report: dict) -> list[dict]:
    """Every agreement statistic of a label report with what it was computed on."""
    agreement = report["agreement"]
    rows = [
        {"statistic": f"Krippendorff alpha ({level})", "value": format_value(value, "kappa"), "note": ""}
        for level, value in agreement["krippendorff_alpha"].items()
    ]
    fleiss = agreement["fleiss_kappa"]
    rows.append(
        {
            "statistic": "Fleiss kappa (labels as categories)",
            "value": format_value(fleiss["value"], "kappa"),
            "note": (
                f"{fleiss['units']} units with {fleiss['raters_per_unit'] or 0} labels; "
                f"{fleiss['units_left_out']} left out"
            ),
        }
    )
    for name, kappa in agreement["cohen_kappa"].items():
        rows.append(
            {
                "statistic": f"Mean pairwise Cohen kappa ({KAPPA_LABELS[name]})",
                "value": format_value(kappa["mean"], "kappa"),
                "note": f"{kappa['pairs']} annotator pairs",
            }
        )
    spans = report["spans"]
    if spans is not None:
        note = f"{spans['items']} items with two or more annotators' spans on the {spans['target']}"
        rows.append(
            {
                "statistic": "Span token F1 (mean pairwise)",
                "value": format_value(spans["token_f1"], "kappa"),
                "note": note,
            }
        )
        rows.append(
            {
                "statistic": "Span exact match (share of pairs)",
                "value": format_value(spans["exact_match"]),
                "note": note,
            }
        )
        rows.append(
            {
                "statistic": "Excerpt BOW-F1 (mean pairwise)",
                "value": format_value(spans["bow_f1"], "kappa"),
                "note": note,
            }
        )
        rows.append(
            {
                "statistic": "Excerpt exact match, words (share of pairs)",
                "value": format_value(spans["text_exact_match"]),
                "note": note,
            }
        )
    for name, field in report["rubric"].items():
        for level, value in field["krippendorff_alpha"].items():
            rows.append(
                {
                    "statistic": f"Rubric {name}: Krippendorff alpha ({level})",
                    "value": format_value(value, "kappa"),
                    "note": f"{field['judgments']} judgments",
                }
            )
    selections = report["selections"]
    if selections is not None:
        note = f"{selections['items']} items with two or more annotators"
        rows.append(
            {
                "statistic": "Selections: mean pairwise Jaccard",
                "value": format_value(selections["jaccard"], "kappa"),
                "note": note,
            }
        )
        rows.append(
            {
                "statistic": "Selections: mean pairwise F1",
                "value": format_value(selections["f1"], "kappa"),
                "note": note,
            }
        )
    return rows


def quotable_line(report: dict) -> str | None:
    share = report["quotable_share"]
    if share is None:
        return None
    what = "Judged quotable by majority vote"
    if share["selection"] == "top_non_gold" and share["runs"]:
        what = f"Run {share['runs'][0]}'s top non-gold paragraphs judged quotable by majority vote"
    if share["items"] == 0:
        return f"{what}: n/a (no item has all its judgments yet)."
    return (
        f"{what}: {format_value(share['share'])} ({share['positives']} of {share['items']} items), "
        f"{100 * share['level']:.0f}% Wilson interval {format_interval(share['interval'])}; "
        f"{share['ties_counted_not_quotable']} ties counted as not quotable, {share['adjudicated']} adjudicated."
    )


def label_annotator_rows(report: dict) -> list[dict]:
    return [
        {
            "annotator": name,
            "judgments": entry["judgments"],
            "gold": f"{entry['gold_correct']}/{entry['gold_judgments']}" if entry["gold_judgments"] else "n/a",
            "gold_accuracy": format_value(entry["gold_accuracy"]),
            "agreement": format_value(entry["agreement_with_majority"]),
            "majority_units": entry["majority_units"],
            "median_seconds": "n/a" if entry["median_seconds"] is None else f"{entry['median_seconds']:.1f}",
        }
        for name, entry in report["annotators"].items()
    ]


def _correlation(entry: dict | None) -> str:
    if entry is None or entry["statistic"] is None:
        return "n/a"
    return f"{entry['statistic']:.3f} (p {format_p_value(entry['p_value'])})"


def label_model_rows(report: dict) -> list[dict]:
    return [
        {
            "run": run_id,
            "name": model["name"],
            "coverage": f"{model['covered_units']}/{model['rated_units']}",
            "spearman": _correlation(model["spearman"]),
            "kendall": _correlation(model["kendall_tau_b"]),
            "note": model["reason"] or "",
        }
        for run_id, model in report["models"].items()
    ]


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def aggregate_rows(report: dict) -> list[dict]:
    """Aggregated labels per unit; a tied majority shows the tied labels."""
    rows = []
    for entry in report["aggregates"]:
        if entry["tied_labels"]:
            majority = "tie: " + " / ".join(_label_name(report, value) for value in entry["tied_labels"])
        else:
            majority = "n/a" if entry["majority"] is None else _label_name(report, entry["majority"])
        adjudicated = entry["adjudicated"]
        rows.append(
            {
                "item": entry["item"],
                "query": entry["query"],
                "passage": entry["passage"]
                + (f" (paragraph {entry['position'] + 1})" if report["study"]["multi_select"] else ""),
                "labels": " ".join(str(label) for label in entry["labels"]) or "none yet",
                "majority": majority,
                "mean": _number(entry["mean"]),
                "median": _number(entry["median"]),
                "adjudicated": "" if adjudicated is None else _label_name(report, adjudicated),
            }
        )
    return rows


def label_report_as_text(report: dict) -> str:
    """A relevance or quotability study's report as plain-text tables."""
    sections = [
        label_summary_line(report) + f"\nComputed {report['computed_at'][:19].replace('T', ' ')} UTC.",
        _text_table(
            "Agreement", label_agreement_rows(report), [("statistic", "statistic"), ("value", "value"), ("note", "")]
        ),
    ]
    quotable = quotable_line(report)
    if quotable:
        sections.append(quotable)
    sections += _position_section(report)
    sections += [
        _text_table(
            "Annotators",
            label_annotator_rows(report),
            [
                ("annotator", "annotator"),
                ("judgments", "judgments"),
                ("gold", "gold correct"),
                ("gold_accuracy", "gold accuracy"),
                ("agreement", "agrees with majority"),
                ("median_seconds", "median seconds"),
            ],
        ),
        _text_table(
            "Model scores against mean human grades",
            label_model_rows(report),
            [
                ("run", "run"),
                ("name", "name"),
                ("coverage", "units scored"),
                ("spearman", "Spearman rho"),
                ("kendall", "Kendall tau-b"),
                ("note", ""),
            ],
        ),
        _text_table("Judges beside the humans", label_judge_rows(report), LABEL_JUDGE_COLUMNS),
        _text_table(
            "Aggregated labels",
            aggregate_rows(report),
            [
                ("item", "item"),
                ("query", "query"),
                ("passage", "passage"),
                ("labels", "labels"),
                ("majority", "majority"),
                ("mean", "mean"),
                ("median", "median"),
                ("adjudicated", "adjudicated"),
            ],
        ),
    ]
    return "\n\n".join(sections)


# --- judges (evaluation.judge_report) -----------------------------------------------------------

PROXY_JUDGE_COLUMNS = [
    ("judge", "judge"),
    ("backend", "backend"),
    ("answered", "answered"),
    ("accuracy", "accuracy"),
    ("p_value", "McNemar p"),
    ("consistency", "self-consistency"),
    ("note", ""),
]
LABEL_JUDGE_COLUMNS = [
    ("judge", "judge"),
    ("backend", "backend"),
    ("answered", "labelled"),
    ("kappa", "kappa vs majority"),
    ("alpha", "alpha vs majority"),
    ("alpha_humans", "alpha humans -> with judge"),
    ("correlation", "Spearman vs mean grade"),
    ("consistency", "self-consistency"),
]


def _consistency(section: dict | None) -> str:
    if not section:
        return "n/a"
    return f"{format_value(section['all_agree'])} of {section['items']} items agree over {section['samples']} samples"


def _answered(judge: dict, done: int) -> str:
    failed = f", {judge['failed']} unreadable" if judge["failed"] else ""
    return f"{done}/{judge['items']}{failed}"


def proxy_judge_rows(report: dict) -> list[dict]:
    rows = []
    for name, judge in report.get("judges", {}).items():
        test = judge["mcnemar"]
        rows.append(
            {
                "judge": f"{name} v{judge['version']}",
                "backend": judge["backend"],
                "answered": _answered(judge, judge["answered_items"]),
                "accuracy": format_value(judge["accuracy"]),
                "p_value": format_p_value(test["p_value"]),
                "consistency": _consistency(judge["self_consistency"]),
                "note": (
                    f"vs human majority on {test['paired_items']} items: judge alone right "
                    f"{test['judge_only_correct']}, humans alone right {test['humans_only_correct']}"
                ),
            }
        )
    return rows


def _first_level(alphas: dict) -> str:
    level = "interval" if "interval" in alphas else "nominal"
    return f"{_number(alphas.get(level))} ({level})"


def label_judge_rows(report: dict) -> list[dict]:
    rows = []
    for name, judge in report.get("judges", {}).items():
        versus = judge["vs_majority"]
        kappas = versus["cohen_kappa"]
        correlation = judge["correlation_with_mean_grade"]
        rows.append(
            {
                "judge": f"{name} v{judge['version']}",
                "backend": judge["backend"],
                "answered": _answered(judge, judge["labelled_units"]),
                "kappa": " / ".join(f"{_number(kappas[key])} {key}" for key in kappas),
                "alpha": _first_level(versus["krippendorff_alpha"]),
                "alpha_humans": (
                    f"{_first_level(judge['krippendorff_alpha_humans'])} -> "
                    f"{_first_level(judge['krippendorff_alpha_with_judge'])}"
                ),
                "correlation": _number(correlation["spearman"]) if correlation else "n/a",
                "consistency": _consistency(judge["self_consistency"]),
            }
        )
    return rows


def judge_confusions(report: dict) -> dict[str, dict]:
    """judge name -> its confusion matrix against the human majority, as table rows."""
    confusions = {}
    for name, judge in report.get("judges", {}).items():
        confusion = judge["confusion"]
        confusions[name] = {
            "values": [_label_name(report, value) for value in confusion["values"]],
            "rows": [
                {"human": _label_name(report, value), "counts": counts}
                for value, counts in zip(confusion["values"], confusion["matrix"])
            ],
        }
    return confusions
