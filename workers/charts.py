"""The gauges page's charts: attempts per minute (done, failed, dead letters), the wait before a
claim (p50, p95) and the pending items by lane, over the last hour or day, drawn by the server
as inline SVG (no script, nothing loaded from elsewhere) from the queue's minutes
(``workqueue/minutes.py``: the sweep's rollup of the attempts).

Each chart is geometry computed here and drawn by ``chart.html``: a series is a path and one
point per span, each point carrying its span and value (``data-at``, ``data-value``), each
series a link to the admin list it counts. Colours are the admin's own CSS variables, so the
charts follow its light and dark themes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from django.urls import reverse

from workqueue import runtime

# The windows a page offers: spans of this many seconds, this many of them.
WINDOWS: dict[str, tuple[int, int]] = {"hour": (60, 60), "day": (600, 144)}
WIDTH, HEIGHT = 640, 190
# The plot's margins: the y axis's labels on the left, the x axis's below.
LEFT, RIGHT, TOP, BOTTOM = 56, 10, 10, 22
# Series are told apart by colour (the admin's variables: chart.html) and dash, cycled.
STYLES = 6


@dataclass(frozen=True)
class Point:
    # Its span's place in the window (0: the oldest).
    i: int
    x: float
    y: float
    at: datetime
    value: float
    text: str  # the value for people ("3", "250 ms")

    @property
    def data(self) -> str:
        """The value as the page's ``data-value`` carries it (``3``, ``0.25``)."""
        return str(int(self.value)) if self.value.is_integer() else f"{self.value:g}"


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    style: int
    href: str
    points: list[Point]
    # The series' own figure for the legend (its total, or its worst).
    summary: str = ""

    @property
    def path(self) -> str:
        """The line through the points, broken where a span has none (no claim to wait)."""
        parts, previous = [], -2
        for point in self.points:
            parts.append(f"{'L' if point.i == previous + 1 else 'M'}{point.x:.1f},{point.y:.1f}")
            previous = point.i
        return " ".join(parts)


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    series: list[Series]
    # (y, label) and (x, label) of the axes' ticks.
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    scale: str = "linear"
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def left(self) -> int:
        return LEFT

    @property
    def right(self) -> int:
        return self.width - RIGHT

    @property
    def bottom(self) -> int:
        return self.height - BOTTOM

    @property
    def points(self) -> int:
        return sum(len(s.points) for s in self.series)


def _x(i: int, n: int) -> float:
    """The middle of span ``i`` of ``n`` across the plot."""
    return LEFT + (i + 0.5) * (WIDTH - LEFT - RIGHT) / n


def _nice_top(top: float) -> float:
    """The axis's top: 1, 2 or 5 times a power of ten, at or above ``top`` (1 at least)."""
    if top <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(top))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= top))


def _count_text(n: float) -> str:
    return f"{n:,.0f}"


def seconds_text(s: float) -> str:
    """A wait for people: ms under a second, s under two minutes, then min and h."""
    if s < 1:
        return f"{s * 1000:g} ms"
    if s < 120:
        return f"{s:g} s"
    if s < 7200:
        return f"{s / 60:g} min"
    return f"{s / 3600:g} h"


def _linear(values: list[list[float]]) -> tuple[Callable[[float], float], list[tuple[float, str]]]:
    top = _nice_top(max((v for series in values for v in series), default=0.0))
    span = HEIGHT - BOTTOM - TOP

    def y(v: float) -> float:
        return HEIGHT - BOTTOM - span * v / top

    ticks = [(y(v), _count_text(v)) for v in (0.0, top / 2, top)]
    return y, ticks


def _log(values: list[list[float]]) -> tuple[Callable[[float], float], list[tuple[float, str]]]:
    """A log axis from the first bound to a decade at or above the largest wait (1 s at
    least): waits of 20 ms and of 5 minutes both read on it."""
    low = math.log10(runtime.WAIT_BOUNDS_S[0])
    largest = max((v for series in values for v in series), default=1.0)
    high = max(0.0, math.ceil(math.log10(max(largest, 1.0))))
    span = HEIGHT - BOTTOM - TOP

    def y(v: float) -> float:
        return HEIGHT - BOTTOM - span * (math.log10(max(v, 10**low)) - low) / (high - low)

    ticks = [(y(10**d), seconds_text(10**d)) for d in range(int(low), int(high) + 1)]
    return y, ticks


def _x_ticks(starts: list[datetime], bin_s: int) -> list[tuple[float, str]]:
    """Six labels across the window, in the database's time zone (UTC)."""
    n = len(starts)
    step = max(1, n // 6)
    fmt = "%H:%M"
    return [(_x(i, n), starts[i].strftime(fmt)) for i in range(0, n, step)]


@dataclass(frozen=True)
class Links:
    """Where each series leads: the admin list of what it counts, in the page's lane (or every
    lane), those failed since the window's start for dead letters."""

    since: datetime
    lane: str | None = None

    def _lane(self, lane: str | None) -> dict[str, str]:
        chosen = lane if lane is not None else self.lane
        return {} if chosen is None or chosen == runtime.UNDECLARED else {"lane": chosen}

    def items(self, status: str, lane: str | None = None) -> str:
        query = {"status__exact": status, **self._lane(lane)}
        return f"{reverse('admin:workqueue_workitem_changelist')}?{urlencode(query)}"

    def dead(self) -> str:
        query = {**self._lane(None), "failed_since": self.since.isoformat()}
        return f"{reverse('admin:workqueue_deadletter_changelist')}?{urlencode(query)}"


def _series(
    key: str,
    label: str,
    style: int,
    href: str,
    spans: list[runtime.Span],
    value: Callable[[runtime.Span], float | None],
) -> tuple[str, str, int, str, list[tuple[datetime, float, int]]]:
    found = []
    for i, span in enumerate(spans):
        v = value(span)
        if v is not None:
            found.append((span.start, float(v), i))
    return key, label, style, href, found


def _draw(
    chart_id: str,
    title: str,
    raw: list[tuple[str, str, int, str, list[tuple[datetime, float, int]]]],
    starts: list[datetime],
    bin_s: int,
    scale: str,
    text: Callable[[float], str],
    summary: Callable[[list[float]], str],
) -> Chart:
    values = [[v for _, v, _ in points] for *_, points in raw]
    y, y_ticks = (_log if scale == "log" else _linear)(values)
    n = len(starts)
    series = []
    for key, label, style, href, points in raw:
        drawn = [Point(i, _x(i, n), y(v), at, v, text(v)) for at, v, i in points]
        series.append(
            Series(key, label, style % STYLES, href, drawn, summary([p.value for p in drawn]))
        )
    return Chart(chart_id, title, series, y_ticks, _x_ticks(starts, bin_s), scale)


def _spans(minutes: runtime.Minutes, lane: str | None) -> list[runtime.Span]:
    """Every lane's spans summed, or ``lane``'s (empty spans when it had none)."""
    if lane is not None and lane not in minutes.lanes:
        return [runtime.Span(start) for start in minutes.starts]
    return minutes.total(lane)


def _pending(span: runtime.Span) -> float:
    return float(span.pending)


def charts(minutes: runtime.Minutes, links: Links, lane: str | None = None) -> list[Chart]:
    """The page's three charts over ``minutes`` (every lane, or ``lane``'s alone)."""
    spans = _spans(minutes, lane)
    per = "minute" if minutes.bin_s == 60 else f"{minutes.bin_s // 60} minutes"

    def total(values: list[float]) -> str:
        return f"{_count_text(sum(values))} in all"

    def worst(values: list[float]) -> str:
        return f"at most {seconds_text(max(values))}" if values else "no claim"

    def deepest(values: list[float]) -> str:
        return f"{_count_text(max(values, default=0))} at most"

    attempts = _draw(
        "chart-attempts",
        f"Attempts per {per}",
        [
            _series("done", "done", 0, links.items("done"), spans, lambda s: s.done),
            _series(
                "failed",
                "failed (retried or handed back)",
                2,
                links.items("pending"),
                spans,
                lambda s: s.failed,
            ),
            _series("dead", "dead letters", 1, links.dead(), spans, lambda s: s.dead),
        ],
        minutes.starts,
        minutes.bin_s,
        "linear",
        _count_text,
        total,
    )
    waits = _draw(
        "chart-waits",
        "Wait before a claim (claims that ended their item)",
        [
            _series(
                "p50",
                "p50",
                0,
                links.items("pending"),
                spans,
                lambda s: runtime.quantile(s.waits, 0.5),
            ),
            _series(
                "p95",
                "p95",
                4,
                links.items("pending"),
                spans,
                lambda s: runtime.quantile(s.waits, 0.95),
            ),
        ],
        minutes.starts,
        minutes.bin_s,
        "log",
        seconds_text,
        worst,
    )
    lanes = [lane] if lane is not None else list(minutes.lanes)
    depth = _draw(
        "chart-depth",
        f"Pending by lane (at each {per}'s first sweep)"
        if minutes.bin_s == 60
        else f"Pending by lane (the most in each {per})",
        [
            _series(name, name, i, links.items("pending", name), _spans(minutes, name), _pending)
            for i, name in enumerate(lanes)
        ],
        minutes.starts,
        minutes.bin_s,
        "linear",
        _count_text,
        deepest,
    )
    return [attempts, waits, depth]
