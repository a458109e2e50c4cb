"""Plots as SVG geometry computed on the server: progress over time (cumulative counts) and
distributions (histograms). The templates draw the polylines and bars; nothing runs in the
browser, so a page is complete as served and the numbers on it are the ones computed here."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

WIDTH = 560
HEIGHT = 180
MARGIN_LEFT = 56
MARGIN_BOTTOM = 24
MARGIN_TOP = 10
MARGIN_RIGHT = 12


@dataclass
class Series:
    name: str
    points: str  # SVG polyline points
    last: int


@dataclass
class Plot:
    series: list[Series]
    y_ticks: list[tuple[int, str]]  # (y position, label)
    x_labels: list[tuple[int, str]]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = MARGIN_LEFT
    bottom: int = HEIGHT - MARGIN_BOTTOM


def _x(value: float, low: float, high: float) -> float:
    span = (high - low) or 1.0
    return MARGIN_LEFT + (value - low) / span * (WIDTH - MARGIN_LEFT - MARGIN_RIGHT)


def _y(value: float, top: float) -> float:
    usable = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    return HEIGHT - MARGIN_BOTTOM - (value / (top or 1.0)) * usable


def cumulative(times: Mapping[str, Sequence[datetime]], now: datetime) -> Plot | None:
    """One rising step line per series: how many of its events happened by each moment.
    None when there is nothing to draw."""
    stamps = [t.timestamp() for series in times.values() for t in series]
    if not stamps:
        return None
    low, high = min(stamps), max(max(stamps), now.timestamp())
    top = max(len(series) for series in times.values())
    drawn = []
    for name, series in times.items():
        points = [f"{_x(low, low, high):.1f},{_y(0, top):.1f}"]
        for count, moment in enumerate(sorted(series), start=1):
            x = _x(moment.timestamp(), low, high)
            points += [f"{x:.1f},{_y(count - 1, top):.1f}", f"{x:.1f},{_y(count, top):.1f}"]
        points.append(f"{_x(high, low, high):.1f},{_y(len(series), top):.1f}")
        drawn.append(Series(name, " ".join(points), len(series)))
    ticks = [(round(_y(v, top)), f"{v:,}") for v in sorted({0, top // 2, top})]
    labels = [
        (round(_x(v, low, high)), datetime.fromtimestamp(v).strftime("%H:%M:%S"))
        for v in (low, high)
    ]
    return Plot(drawn, ticks, labels)


@dataclass
class Bar:
    x: int
    y: int
    width: int
    height: int
    count: int
    low: str
    high: str


@dataclass
class Histogram:
    name: str
    unit: str
    bars: list[Bar]
    count: int
    median: str
    low: str
    high: str
    width: int = WIDTH
    height: int = 90


def histogram(
    name: str, unit: str, values: Sequence[float], *, bins: int = 24, scale: float = 1.0
) -> Histogram | None:
    """The distribution of `values` (divided by `scale` for display) in equal-width bins."""
    if not values:
        return None
    shown = sorted(v / scale for v in values)
    low, high = shown[0], shown[-1]
    width = (high - low) / bins or 1.0
    filled = [0] * bins
    for value in shown:
        filled[min(bins - 1, math.floor((value - low) / width))] += 1
    tallest = max(filled)
    usable_w, usable_h = WIDTH - 2 * MARGIN_RIGHT, 90 - 16
    bar_w = usable_w / bins
    bars = [
        Bar(
            x=round(MARGIN_RIGHT + i * bar_w),
            y=round(usable_h - count / tallest * usable_h),
            width=max(1, round(bar_w) - 1),
            height=round(count / tallest * usable_h),
            count=count,
            low=_number(low + i * width),
            high=_number(low + (i + 1) * width),
        )
        for i, count in enumerate(filled)
    ]
    median = shown[len(shown) // 2]
    return Histogram(name, unit, bars, len(shown), _number(median), _number(low), _number(high))


def _number(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
