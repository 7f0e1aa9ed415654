"""The run page's recall@k curve as inline SVG: k on a log axis, recall 0..1, one point per
cutoff with ± one standard error. Plain markup, no JavaScript, nothing fetched."""

from __future__ import annotations

import math

from django.utils.safestring import SafeString, mark_safe

from evaluation.charts import share_gridlines, svg_open

LINE = "#3a5ccc"


def recall_curve_svg(points: list[dict], title: str, width: int = 560, height: int = 280) -> SafeString:
    """`points`: [{"k", "value", "stderr"}] in increasing k (console.selectors.recall_points)."""
    if not points:
        return mark_safe("")
    left, right, top, bottom = 48, 16, 36, 36
    plot_width, plot_height = width - left - right, height - top - bottom
    low_k, high_k = math.log(points[0]["k"]), math.log(points[-1]["k"])

    def x(k: int) -> float:
        return left + (plot_width * (math.log(k) - low_k) / (high_k - low_k) if high_k > low_k else plot_width / 2)

    def y(share: float) -> float:
        return top + plot_height * (1 - max(0.0, min(1.0, share)))

    parts = [*svg_open(title, width, height, "recall-curve"), *share_gridlines(left, width - right, y)]
    line = " ".join(f"{x(point['k']):.1f},{y(point['value']):.1f}" for point in points)
    parts.append(f'<polyline points="{line}" fill="none" stroke="{LINE}" stroke-width="2"/>')
    for point in points:
        cx, cy = x(point["k"]), y(point["value"])
        stderr = point["stderr"] or 0.0
        label = f"recall@{point['k']}: {point['value']:.3f}" + (f" ± {stderr:.3f}" if point["stderr"] else "")
        parts.append(
            f'<g class="point"><title>{label}</title>'
            f'<path d="M{cx:.1f},{y(point["value"] - stderr):.1f}V{y(point["value"] + stderr):.1f}" '
            f'stroke="#1d1d1f" stroke-width="1.2"/>'
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{LINE}"/>'
            f'<text x="{cx:.1f}" y="{height - bottom + 16}" font-size="11" text-anchor="middle">{point["k"]}</text></g>'
        )
    middle = left + plot_width / 2
    parts.append(f'<text x="{middle:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">k (log scale)</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))
