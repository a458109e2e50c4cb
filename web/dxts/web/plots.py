"""Plots as SVG geometry computed on the server: progress over time (cumulative counts),
counts in equal spans of time (step lines), a rate in equal spans (bars) and distributions
(histograms). The templates draw
the polylines and bars; nothing runs in the browser, so a page is complete as served and the
numbers on it are the ones computed here."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

WIDTH = 560
HEIGHT = 180
MARGIN_LEFT = 56
MARGIN_BOTTOM = 24
MARGIN_TOP = 10
MARGIN_RIGHT = 12
HIST_HEIGHT = 120
MIN_SLOTS = 10


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


def cumulative(
    times: Mapping[str, Sequence[datetime]],
    now: datetime,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
) -> Plot | None:
    """One rising step line per series: how many of its events happened by each moment, from
    `start` (the member's start; else the first event) to `end` (its end once finished; else
    now), so a finished member's line spans its own run rather than a step squeezed to the
    left of "now". None when there is nothing to draw."""
    stamps = [t.timestamp() for series in times.values() for t in series]
    if not stamps:
        return None
    low = min([*stamps, *([start.timestamp()] if start else [])])
    high = max([*stamps, (end or now).timestamp()])
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
        (round(_x(v, low, high)), datetime.fromtimestamp(v, UTC).strftime("%H:%M:%S"))
        for v in (low, high)
    ]
    return Plot(drawn, ticks, labels)


def spans(series: Mapping[str, Sequence[int]], start: datetime, end: datetime) -> Plot | None:
    """One step line per series over equal spans from `start` to `end`: each span drawn at its
    value (a level at the span's end, or a count within it, as the caller says in the
    caption). None when every value is zero."""
    top = max((v for values in series.values() for v in values), default=0)
    if not top:
        return None
    low, high = start.timestamp(), end.timestamp()
    drawn = []
    for name, values in series.items():
        width = (high - low) / max(1, len(values))
        points = []
        for n, value in enumerate(values):
            y = f"{_y(value, top):.1f}"
            points += [f"{_x(low + n * width, low, high):.1f},{y}"]
            points += [f"{_x(low + (n + 1) * width, low, high):.1f},{y}"]
        drawn.append(Series(name, " ".join(points), values[-1] if values else 0))
    ticks = [(round(_y(v, top)), f"{v:,}") for v in sorted({0, top // 2, top})]
    labels = [
        (round(_x(v, low, high)), datetime.fromtimestamp(v, UTC).strftime("%H:%M:%S"))
        for v in (low, high)
    ]
    return Plot(drawn, ticks, labels)


RATE_TOPS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # the rate axis ends at the first ≥ the top


@dataclass
class RateBar:
    x: int
    y: int
    width: int
    height: int
    failed: int
    ended: int
    title: str  # "12:00:00 to 12:05:00 UTC: 3 failed of 40 ended (7.5%)"

    @property
    def rate(self) -> float:
        return self.failed / self.ended


@dataclass
class RatePlot:
    """Failed over ended parcels per span: one bar per span in which any parcel ended (a span
    with none has no rate, and no bar)."""

    bars: list[RateBar]
    y_ticks: list[tuple[int, str]]
    x_labels: list[tuple[int, str]]
    failed: int
    ended: int
    width: int = WIDTH
    height: int = HEIGHT
    left: int = MARGIN_LEFT
    bottom: int = HEIGHT - MARGIN_BOTTOM

    @property
    def rate(self) -> float:
        return self.failed / self.ended

    @property
    def percent(self) -> str:
        return percent(self.rate)


def percent(rate: float) -> str:
    return f"{rate * 100:.3g}%"


def failure_rate(
    done: Sequence[int], failed: Sequence[int], start: datetime, end: datetime
) -> RatePlot | None:
    """Each span's failure rate (failed / (done + failed) of the parcels that ended in it), on
    an axis from 0 to the first of RATE_TOPS at least the highest rate, so that a rate of a few
    percent is not a line along the bottom. None when no parcel failed."""
    if not sum(failed):
        return None
    ended = [d + f for d, f in zip(done, failed, strict=True)]
    highest = max(f / e for f, e in zip(failed, ended, strict=True) if e)
    top = next(t for t in RATE_TOPS if t >= highest)
    low, high = start.timestamp(), end.timestamp()
    span = (high - low) / max(1, len(ended))
    usable = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    bars = []
    for n, (lost, total) in enumerate(zip(failed, ended, strict=True)):
        if not total:
            continue
        x = MARGIN_LEFT + n * usable / len(ended)
        # A span with no failure is a 1 px bar on the axis: a rate of 0, not a missing one.
        height = max(1, round(_y(0, top) - _y(lost / total, top)))
        began = datetime.fromtimestamp(low + n * span, UTC).strftime("%H:%M:%S")
        until = datetime.fromtimestamp(low + (n + 1) * span, UTC).strftime("%H:%M:%S")
        bars.append(
            RateBar(
                x=round(x),
                y=round(_y(0, top)) - height,
                width=max(1, round(usable / len(ended)) - 1),
                height=height,
                failed=lost,
                ended=total,
                title=f"{began} to {until} UTC: {lost:,} failed of {total:,} ended"
                f" ({percent(lost / total)})",
            )
        )
    ticks = [(round(_y(v, top)), percent(v)) for v in (0, top / 2, top)]
    labels = [
        (round(_x(v, low, high)), datetime.fromtimestamp(v, UTC).strftime("%H:%M:%S"))
        for v in (low, high)
    ]
    return RatePlot(bars, ticks, labels, failed=sum(failed), ended=sum(ended))


@dataclass
class Bar:
    x: int
    y: int
    width: int
    height: int
    count: int
    low: str
    high: str
    kind: str = "succeeded"  # or "failed": drawn apart, stacked in one bin


@dataclass
class Histogram:
    name: str
    unit: str
    bars: list[Bar]
    count: int
    median: str
    low: str
    high: str
    y_ticks: list[tuple[int, str]] = field(default_factory=list)  # (y position, count)
    x_ticks: list[tuple[int, str]] = field(default_factory=list)  # (x position, value)
    failed: int = 0
    width: int = WIDTH
    height: int = HIST_HEIGHT
    left: int = MARGIN_LEFT
    bottom: int = HIST_HEIGHT - MARGIN_BOTTOM


def nice(step: float) -> float:
    """The round step (1, 2 or 5 times a power of ten) at least `step`."""
    if step <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(step))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= step * (1 - 1e-9))


def bin_width(values: Sequence[float], max_bins: int) -> float:
    """A round bin width from the data's spread (Freedman-Diaconis: twice the interquartile
    range over the cube root of the count), never more than `max_bins` bins across the range.
    A spread of nothing gets one bin a tenth of the value wide."""
    low, high = values[0], values[-1]
    if high == low:
        return nice(abs(low) / 10 or 1.0)
    quartile = len(values) // 4
    spread = values[-1 - quartile] - values[quartile]
    width = 2 * spread / len(values) ** (1 / 3) if spread else (high - low) / max_bins
    return nice(max(width, (high - low) / max_bins))


def histogram(
    name: str,
    unit: str,
    values: Sequence[float] | Mapping[str, Sequence[float]],
    *,
    bins: int = 24,
    scale: float = 1.0,
) -> Histogram | None:
    """The distribution of `values` (divided by `scale` for display) in round bins chosen from
    their spread, with a count axis; values given by kind ({"succeeded": [...], "failed":
    [...]}) are counted apart and stacked, failed on top."""
    kinds = dict(values) if isinstance(values, Mapping) else {"succeeded": values}
    shown_by_kind = {k: sorted(v / scale for v in vs) for k, vs in kinds.items()}
    shown = sorted(v for vs in shown_by_kind.values() for v in vs)
    if not shown:
        return None
    width = bin_width(shown, bins)
    start = math.floor(shown[0] / width) * width
    count = max(1, math.floor((shown[-1] - start) / width) + 1)
    filled = {k: [0] * count for k in shown_by_kind}
    for kind, listed in shown_by_kind.items():
        for value in listed:
            filled[kind][min(count - 1, math.floor((value - start) / width))] += 1
    totals = [sum(f[i] for f in filled.values()) for i in range(count)]
    tallest = max(totals)
    usable_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    usable_h = HIST_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    # At least MIN_SLOTS bins' room: two bins of a narrow spread are two narrow bars, not
    # the whole width.
    slots = max(count, MIN_SLOTS)
    bar_w = usable_w / slots
    bottom = HIST_HEIGHT - MARGIN_BOTTOM
    bars = []
    for i in range(count):
        base = 0
        for kind in ("succeeded", "failed"):
            here = filled.get(kind, [0] * count)[i]
            if not here:
                continue
            height = here / tallest * usable_h
            bars.append(
                Bar(
                    x=round(MARGIN_LEFT + i * bar_w),
                    y=round(bottom - (base + here) / tallest * usable_h),
                    width=max(1, round(bar_w) - 1),
                    height=max(1, round(height)),
                    count=here,
                    low=_number(start + i * width, width),
                    high=_number(start + (i + 1) * width, width),
                    kind=kind,
                )
            )
            base += here
    step = max(1, math.ceil(slots / 6))
    x_ticks = [
        (round(MARGIN_LEFT + i * bar_w), _number(start + i * width, width))
        for i in range(0, slots + 1, step)
    ]
    y_ticks = [
        (round(bottom - v / tallest * usable_h), f"{v:,}")
        for v in sorted({0, tallest // 2, tallest})
    ]
    median = shown[len(shown) // 2]
    return Histogram(
        name,
        unit,
        bars,
        len(shown),
        _number(median),
        _number(shown[0]),
        _number(shown[-1]),
        y_ticks=y_ticks,
        x_ticks=x_ticks,
        failed=len(shown_by_kind.get("failed", [])),
    )


def _number(value: float, step: float | None = None) -> str:
    """`value` with as many decimals as `step` (a bin width) needs to tell its edges apart."""
    if step is not None and step < 1:
        return f"{value:,.{-math.floor(math.log10(step))}f}"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
