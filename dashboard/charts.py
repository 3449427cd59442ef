"""Geometry for the small server-rendered SVG charts of the overview. The templates only
draw the shapes and texts computed here; no chart library is loaded in the browser."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    value: int


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    anchor: str = "start"  # SVG text-anchor
    css: str = ""


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass
class Chart:
    width: int
    height: int
    bars: list[Bar]
    texts: list[Text] = field(default_factory=list)
    gridlines: list[Line] = field(default_factory=list)

    @property
    def description(self) -> str:
        """What the chart shows, as text for screen readers (non-zero bars only)."""
        shown = [f"{bar.label}: {bar.value}" for bar in self.bars if bar.value]
        return "; ".join(shown) if shown else "No data."


def nice_max(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten at or above `value` (at least 1)."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 5, 10) if step * power >= value)


def daily_columns(points: list[tuple[date, int]], *, width: int = 440, height: int = 170) -> Chart:
    """One column per day, a value axis with gridlines at 0, half and the top, and a
    date under the first column, every 7th one and the last (unless too close)."""
    left, right, top, bottom = 36.0, 8.0, 8.0, 24.0
    plot_w, plot_h = width - left - right, height - top - bottom
    top_value = nice_max(max((v for _, v in points), default=0))
    slot = plot_w / max(len(points), 1)
    chart = Chart(width, height, [])
    for share in (0.0, 0.5, 1.0) if top_value > 1 else (0.0, 1.0):
        y = round(top + plot_h * (1 - share), 2)
        chart.gridlines.append(Line(left, y, width - right, y))
        chart.texts.append(Text(left - 6, y + 4, f"{top_value * share:g}", "end"))
    for index, (day, value) in enumerate(points):
        x = left + index * slot
        h = plot_h * value / top_value
        chart.bars.append(
            Bar(
                round(x + 1, 2),
                round(top + plot_h - h, 2),
                round(max(slot - 2, 1), 2),
                round(h, 2),
                day.isoformat(),
                value,
            )
        )
        is_last = index == len(points) - 1
        if (index % 7 == 0 and len(points) - 1 - index >= 4) or is_last:
            # The last date ends at the plot's right edge so it is never clipped.
            at, anchor = (width - right, "end") if is_last else (round(x + slot / 2, 2), "middle")
            chart.texts.append(Text(at, height - 6, day.strftime("%b %d"), anchor))
    return chart


def horizontal_bars(points: list[tuple[str, int]], *, width: int = 440, row: int = 26) -> Chart:
    """A labelled bar per item, the longest for the largest value, the value after it."""
    left, right = 80.0, 36.0
    plot_w = width - left - right
    top_value = max((v for _, v in points), default=0) or 1
    chart = Chart(width, row * len(points) + 4, [])
    for index, (label, value) in enumerate(points):
        y = 2 + index * row
        bar_w = round(plot_w * value / top_value, 2)
        chart.bars.append(Bar(left, y + 5, bar_w, row - 10, label, value))
        middle = y + row / 2 + 4
        chart.texts.append(Text(left - 8, middle, label, "end"))
        chart.texts.append(Text(left + bar_w + 6, middle, str(value), "start", "value"))
    return chart
