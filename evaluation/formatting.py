"""Study reports as rows for people: the staff page and the command's text output show the same
tables, built here from the report's JSON payload."""
from __future__ import annotations

AGREEMENT_STATISTICS = (
    ("fleiss_kappa", "Fleiss kappa (category = position shown)", "kappa"),
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
    return [
        {
            "annotator": name,
            "judgments": tally["judgments"],
            "correct": tally["correct"],
            "accuracy": format_value(tally["accuracy"]),
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
        f"Study {study['id']} \"{study['name']}\": {report['items']} items, {report['complete_items']} with "
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
    """The whole report as plain-text tables (the command's output without --json)."""
    level = f"{100 * report['confidence']['level']:.0f}% CI"
    sections = [
        summary_line(report) + "\n" + method_line(report),
        _text_table(
            "Agreement and human accuracy",
            agreement_rows(report),
            [("statistic", "statistic"), ("value", "value"), ("interval", level), ("random", "random annotators")],
        ),
        _text_table(
            "Annotators", annotator_rows(report),
            [("annotator", "annotator"), ("judgments", "judgments"), ("correct", "correct"), ("accuracy", "accuracy")],
        ),
        _text_table(
            "Models",
            model_rows(report),
            [("run", "run"), ("name", "name"), ("accuracy", "accuracy"), ("interval", level),
             ("coverage", "coverage"), ("p_value", "McNemar p"), ("note", "")],
        ),
        _text_table(
            "Items where all annotators chose the same wrong option",
            error_rows(report["error_analysis"]["unanimous_non_gold"], "chosen"),
            [("item", "item"), ("query", "query"), ("gold", "gold"), ("chosen", "chosen"), ("votes", "votes")],
        ),
    ]
    for run_id, entries in report["error_analysis"]["humans_agree_model_fails"].items():
        sections.append(
            _text_table(
                f"Items where all annotators chose the gold and run {run_id} did not",
                error_rows(entries, "model_answer"),
                [("item", "item"), ("query", "query"), ("gold", "gold"), ("chosen", "model's answer")],
            )
        )
    return "\n\n".join(sections)
