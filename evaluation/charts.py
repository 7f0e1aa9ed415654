"""Server-side SVG charts for the staff pages: plain markup, no JavaScript, nothing fetched."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

BAR_COLOURS = {"humans": "#3a5ccc", "model": "#7a8599", "random": "#c9c9cf"}
CHARACTER_WIDTH = 6.5  # px, roughly, at font-size 11


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    low: float | None
    high: float | None
    kind: str  # "humans", "model" or "random": picks the colour


def accuracy_bars(report: dict) -> list[Bar]:
    """Accuracy of the human majority, each comparable model and a random annotator, each with
    its 95 % interval (for random: the range a random guesser reaches on as many items)."""

    def bar(label, value, interval, kind):
        interval = interval or {}
        return Bar(label, value, interval.get("low"), interval.get("high"), kind)

    bars = []
    if report["majority_accuracy"] is not None:
        bars.append(
            bar(
                "Humans (majority)",
                report["majority_accuracy"],
                report["confidence_intervals"]["majority_accuracy"],
                "humans",
            )
        )
    for model in report["models"].values():
        if model["accuracy"] is not None:
            bars.append(
                bar(f"{model['name']} (run {model['run']})", model["accuracy"], model["confidence_interval"], "model")
            )
    random = report["random_baseline"]
    bars.append(bar("Random", random["accuracy"], random["accuracy_range"], "random"))
    return bars


def label_distribution_bars(report: dict) -> list[Bar]:
    """Share of the counted judgments (units, in a multi-select study) given each label."""
    counts = report["label_counts"]
    total = sum(counts.values())
    names = report["study"]["value_labels"]
    return [
        Bar(names.get(value, value), count / total if total else 0.0, None, None, "humans")
        for value, count in counts.items()
    ]


def annotator_agreement_bars(report: dict) -> list[Bar]:
    """Each annotator's agreement with the majority label, for spotting the odd one out."""
    return [
        Bar(name, entry["agreement_with_majority"], None, None, "humans")
        for name, entry in report["annotators"].items()
        if entry["agreement_with_majority"] is not None
    ]


GRID = "#dcdce0"


def svg_open(title: str, width: int, height: int, css_class: str = "") -> list[str]:
    """The opening of every chart of the platform: the svg element (an image named by its
    title, for screen readers too), its tooltip title and the title written above the plot."""
    classes = f"chart {css_class}" if css_class else "chart"
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}" class="{classes}">',
        f"<title>{escape(title)}</title>",
        f'<text x="48" y="18" font-size="13" font-weight="600">{escape(title)}</text>',
    ]


def share_gridlines(left: int, right_end: float, y) -> list[str]:
    """Horizontal lines at 0, 25, 50, 75 and 100 % of a share axis, labelled on the left;
    `y` maps a share to its height."""
    return [
        f'<line x1="{left}" x2="{right_end}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="{GRID}"/>'
        f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="11" text-anchor="end">{tick:.0%}</text>'
        for tick in (0, 0.25, 0.5, 0.75, 1.0)
    ]


def bar_chart_svg(bars: list[Bar], title: str, width: int = 640, height: int = 300) -> SafeString:
    """A vertical bar chart of shares (0..1) with error bars, as inline SVG."""
    left, right, top, bottom = 48, 12, 44, 40
    plot_width, plot_height = width - left - right, height - top - bottom
    slot = plot_width / max(len(bars), 1)
    bar_width = min(slot * 0.6, 90)
    label_characters = max(int(slot / CHARACTER_WIDTH), 4)

    def y(share: float) -> float:
        return top + plot_height * (1 - max(0.0, min(1.0, share)))

    parts = [*svg_open(title, width, height), *share_gridlines(left, width - right, y)]
    for index, bar in enumerate(bars):
        centre = left + slot * (index + 0.5)
        label = bar.label if len(bar.label) <= label_characters else bar.label[: label_characters - 1] + "…"
        parts.append(
            f'<g class="bar bar-{escape(bar.kind)}"><title>{escape(bar.label)}: {bar.value:.1%}</title>'
            f'<rect x="{centre - bar_width / 2:.1f}" y="{y(bar.value):.1f}" width="{bar_width:.1f}" '
            f'height="{y(0) - y(bar.value):.1f}" fill="{BAR_COLOURS[bar.kind]}"/>'
        )
        if bar.low is not None and bar.high is not None:
            cap = bar_width / 6
            parts.append(
                f'<path class="error-bar" d="M{centre:.1f},{y(bar.low):.1f}V{y(bar.high):.1f}'
                f"M{centre - cap:.1f},{y(bar.low):.1f}H{centre + cap:.1f}"
                f'M{centre - cap:.1f},{y(bar.high):.1f}H{centre + cap:.1f}"'
                ' stroke="#1d1d1f" stroke-width="1.5" fill="none"/>'
            )
        value_y = y(bar.high if bar.high is not None else bar.value) - 6
        parts.append(
            f'<text x="{centre:.1f}" y="{value_y:.1f}" font-size="11" text-anchor="middle">{bar.value:.1%}</text>'
            f'<text x="{centre:.1f}" y="{height - bottom + 18}" font-size="11" text-anchor="middle">'
            f"{escape(label)}</text>"
            "</g>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))


Z_95 = 1.959963984540054  # the normal quantile of a two-sided 95 % interval


def run_intervals_svg(comparison: dict, metric: str, width: int = 640, height: int = 300) -> SafeString:
    """Each run's mean of `metric` as a point with its 95 % interval (mean ± 1.96 standard
    errors), on an axis from 0 to the largest upper end (at least 1 for shares)."""
    left, right, top, bottom = 48, 12, 44, 40
    plot_width, plot_height = width - left - right, height - top - bottom
    rows = []
    for run_id, block in comparison["runs"].items():
        mean, stderr = block["metrics"][metric], block["stderr"][metric] or 0.0
        rows.append((f"{block['name']} (run {run_id})", mean, mean - Z_95 * stderr, mean + Z_95 * stderr))
    ceiling = max([1.0, *(high for *_, high in rows)])
    floor = min([0.0, *(low for _, _, low, _ in rows)])

    def y(value: float) -> float:
        return top + plot_height * (1 - (value - floor) / (ceiling - floor))

    slot = plot_width / max(len(rows), 1)
    parts = svg_open(f"{metric} with 95% intervals", width, height, "run-intervals")
    for tick in np.linspace(floor, ceiling, 5):
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="{GRID}"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="11" text-anchor="end">{tick:.2f}</text>'
        )
    for index, (label, mean, low, high) in enumerate(rows):
        centre = left + slot * (index + 0.5)
        parts.append(
            f'<g class="run-interval"><title>{escape(label)}: {mean:.4f} [{low:.4f}, {high:.4f}]</title>'
            f'<path d="M{centre:.1f},{y(low):.1f}V{y(high):.1f}M{centre - 8:.1f},{y(low):.1f}H{centre + 8:.1f}'
            f'M{centre - 8:.1f},{y(high):.1f}H{centre + 8:.1f}" stroke="#1d1d1f" stroke-width="1.5" fill="none"/>'
            f'<circle cx="{centre:.1f}" cy="{y(mean):.1f}" r="5" fill="{BAR_COLOURS["humans"]}"/>'
            f'<text x="{centre + 10:.1f}" y="{y(mean) + 4:.1f}" font-size="11">{mean:.4f}</text>'
            f'<text x="{centre:.1f}" y="{height - bottom + 18}" font-size="11" text-anchor="middle">'
            f"{escape(label[:40])}</text></g>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))


def differences_svg(differences: list[float], title: str, width: int = 640, height: int = 220) -> SafeString:
    """Per-query differences (a - b), sorted, as bars above (a better) or below (b better) zero."""
    left, right, top, bottom = 48, 12, 36, 16
    plot_width, plot_height = width - left - right, height - top - bottom
    ordered = sorted(differences, reverse=True)
    extent = max([abs(value) for value in ordered] + [1e-9])

    def y(value: float) -> float:
        return top + plot_height * (0.5 - value / (2 * extent))

    slot = plot_width / max(len(ordered), 1)
    parts = svg_open(title, width, height, "query-differences")
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#1d1d1f"/>'
        f'<text x="{left - 6}" y="{y(extent) + 4:.1f}" font-size="11" text-anchor="end">+{extent:.2f}</text>'
        f'<text x="{left - 6}" y="{y(-extent) + 4:.1f}" font-size="11" text-anchor="end">-{extent:.2f}</text>'
    )
    for index, value in enumerate(ordered):
        colour = BAR_COLOURS["humans"] if value >= 0 else BAR_COLOURS["model"]
        parts.append(
            f'<rect class="difference" x="{left + slot * index:.1f}" y="{min(y(0), y(value)):.1f}" '
            f'width="{max(slot * 0.8, 0.5):.1f}" height="{abs(y(value) - y(0)):.1f}" fill="{colour}">'
            f"<title>{value:+.4f}</title></rect>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))


def agreement_over_time_svg(windows: list[dict], title: str, width: int = 640, height: int = 240) -> SafeString:
    """Each window's share of agreeing pairs and Cohen's kappa, left to right in time, as two lines
    on an axis from min(0, lowest value) to 1 (a window without pairs leaves a gap)."""
    left, right, top, bottom = 48, 12, 44, 28
    plot_width, plot_height = width - left - right, height - top - bottom
    series = {
        "percent_agreement": [window["percent_agreement"] for window in windows],
        "cohen_kappa": [window["cohen_kappa"] for window in windows],
    }
    floor = min([0.0, *(value for values in series.values() for value in values if value is not None)])

    def x(index: int) -> float:
        return left + plot_width * (index + 0.5) / max(len(windows), 1)

    def y(value: float) -> float:
        return top + plot_height * (1 - (value - floor) / (1.0 - floor))

    parts = svg_open(title, width, height, "agreement-over-time")
    for tick in np.linspace(floor, 1.0, 5):
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="{GRID}"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="11" text-anchor="end">{tick:.2f}</text>'
        )
    colours = {"percent_agreement": BAR_COLOURS["model"], "cohen_kappa": BAR_COLOURS["humans"]}
    names = {"percent_agreement": "agreeing pairs", "cohen_kappa": "Cohen's kappa"}
    for name, values in series.items():
        path, pen_down = [], False
        for index, value in enumerate(values):
            if value is None:
                pen_down = False
                continue
            path.append(f"{'L' if pen_down else 'M'}{x(index):.1f},{y(value):.1f}")
            pen_down = True
        parts.append(
            f'<path class="series series-{name}" d="{"".join(path)}" stroke="{colours[name]}" '
            f'stroke-width="1.5" fill="none"><title>{names[name]}</title></path>'
        )
    legend_x = width - right - 230
    for offset, name in enumerate(series):
        parts.append(
            f'<text x="{legend_x + offset * 120}" y="{height - 8}" font-size="11" fill="{colours[name]}">'
            f"— {names[name]}</text>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))
