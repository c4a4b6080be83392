"""The gauges page's charts: attempts per minute (done, failed, dead letters), the wait before a
claim (p50, p95), the pending items by lane, the oldest waiting item by lane and kind, and the
attempts' run time by kind (p50, p95), over the last hour or day, drawn by the server as inline
SVG (no script, nothing loaded from elsewhere) from the queue's minutes
(``workqueue/minutes.py``: the sweep's rollup of the attempts and its samples of what waits).

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
from typing import Any
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


def _x_ticks(starts: list[datetime]) -> list[tuple[float, str]]:
    """About six labels across the window, in the database's time zone (UTC)."""
    n = len(starts)
    step = max(1, n // 6)
    ticks = list(range(0, n, step))
    if n - 1 - ticks[-1] >= step // 2:  # the current span too, unless it would crowd the last
        ticks.append(n - 1)
    return [(_x(i, n), starts[i].strftime("%H:%M")) for i in ticks]


@dataclass(frozen=True)
class Links:
    """Where each series leads: the admin list of what it counts, in the page's lane (or every
    lane), those failed since the window's start for dead letters."""

    since: datetime
    lane: str | None = None

    def _lane(self, lane: str | None) -> dict[str, str]:
        chosen = lane if lane is not None else self.lane
        return {} if chosen is None or chosen == runtime.UNDECLARED else {"lane": chosen}

    def items(self, status: str, lane: str | None = None, **more: str) -> str:
        query = {"status__exact": status, **self._lane(lane), **more}
        return f"{reverse('admin:workqueue_workitem_changelist')}?{urlencode(query)}"

    def waiting(self, lane: str, kind: str) -> str:
        """The pending items of a lane's kind, the longest waiting first."""
        query = {"sort": "waiting", **self._lane(lane)}
        if kind != runtime.UNKNOWN_KIND:
            query["kind"] = kind
        return f"{reverse('admin:workqueue_workitem_changelist')}?{urlencode(query)}"

    def dead(self) -> str:
        query = {**self._lane(None), "failed_since": self.since.isoformat()}
        return f"{reverse('admin:workqueue_deadletter_changelist')}?{urlencode(query)}"


@dataclass(frozen=True)
class Line:
    """A series before it is drawn: what it is, where it leads, and its value in a span (None:
    no point there)."""

    key: str
    label: str
    style: int
    href: str
    # A lane's spans (runtime.Span) or a kind's (runtime.KindSpan).
    spans: list[Any]
    value: Callable[[Any], float | None]

    def values(self) -> list[tuple[int, Any, float]]:
        found = []
        for i, span in enumerate(self.spans):
            v = self.value(span)
            if v is not None:
                found.append((i, span, float(v)))
        return found


def _draw(
    chart_id: str,
    title: str,
    lines: list[Line],
    starts: list[datetime],
    scale: str,
    text: Callable[[float], str],
    summary: Callable[[list[float]], str],
) -> Chart:
    found = [line.values() for line in lines]
    y, y_ticks = (_log if scale == "log" else _linear)([[v for *_, v in f] for f in found])
    n = len(starts)
    series = []
    for line, values in zip(lines, found, strict=True):
        points = [Point(i, _x(i, n), y(v), span.start, v, text(v)) for i, span, v in values]
        figure = summary([p.value for p in points])
        series.append(Series(line.key, line.label, line.style % STYLES, line.href, points, figure))
    return Chart(chart_id, title, series, y_ticks, _x_ticks(starts), scale)


def spans_of(minutes: runtime.Minutes, lane: str | None) -> list[runtime.Span]:
    """Every lane's spans summed, or ``lane``'s (empty spans when it had none)."""
    if lane is not None and lane not in minutes.lanes:
        return [runtime.Span(start) for start in minutes.starts]
    return minutes.total(lane)


def _total(values: list[float]) -> str:
    return f"{_count_text(sum(values))} in all"


def _worst(values: list[float]) -> str:
    return f"at most {seconds_text(max(values))}" if values else "no claim"


def _deepest(values: list[float]) -> str:
    return f"{_count_text(max(values, default=0))} at most"


def charts(minutes: runtime.Minutes, links: Links, lane: str | None = None) -> list[Chart]:
    """The page's three charts over ``minutes`` (every lane, or ``lane``'s alone)."""
    spans = spans_of(minutes, lane)
    per = "minute" if minutes.bin_s == 60 else f"{minutes.bin_s // 60} minutes"
    pending = links.items("pending")
    attempts = [
        Line("done", "done", 0, links.items("done"), spans, lambda s: s.done),
        # A failed attempt's item waits for its retry, pending (or is a dead letter).
        Line("failed", "failed (retried or handed back)", 2, pending, spans, lambda s: s.failed),
        Line("dead", "dead letters", 1, links.dead(), spans, lambda s: s.dead),
    ]
    waits = [
        Line("p50", "p50", 0, pending, spans, lambda s: runtime.quantile(s.waits, 0.5)),
        Line("p95", "p95", 4, pending, spans, lambda s: runtime.quantile(s.waits, 0.95)),
    ]
    depth = [
        Line(name, name, i, links.items("pending", name), spans_of(minutes, name), _pending)
        for i, name in enumerate([lane] if lane is not None else list(minutes.lanes))
    ]
    sampled = "at each minute's first sweep" if minutes.bin_s == 60 else f"the most in {per}"
    starts = minutes.starts
    return [
        _draw(
            "chart-attempts", f"Attempts per {per}", attempts, starts, "linear", _count_text, _total
        ),
        _draw(
            "chart-waits",
            "Wait before a claim (claims that ended their item)",
            waits,
            starts,
            "log",
            seconds_text,
            _worst,
        ),
        _draw(
            "chart-depth",
            f"Pending by lane ({sampled})",
            depth,
            starts,
            "linear",
            _count_text,
            _deepest,
        ),
    ]


def _pending(span: runtime.Span) -> float:
    return float(span.pending)


def _kinds_in(kind_minutes: runtime.KindMinutes, lane: str | None) -> dict[str, list[Any]]:
    """Each kind's spans, in ``lane`` or summed over every lane (the oldest wait: the most)."""
    found: dict[str, list[runtime.KindSpan]] = {}
    for (at, kind), spans in kind_minutes.kinds.items():
        if lane is not None and at != lane:
            continue
        if kind not in found:
            found[kind] = spans
            continue
        found[kind] = [
            runtime.KindSpan(
                a.start,
                max((v for v in (a.oldest_wait_s, b.oldest_wait_s) if v is not None), default=None),
                tuple(x + y for x, y in zip(a.runs, b.runs, strict=True)),
            )
            for a, b in zip(found[kind], spans, strict=True)
        ]
    return found


def _busiest(lines: list[Line], key: Callable[[Line], float], n: int) -> list[Line]:
    """At most ``n`` lines, those whose figure is largest first (a legend stays readable)."""
    return sorted(lines, key=key, reverse=True)[:n]


def kind_charts(
    kind_minutes: runtime.KindMinutes, links: Links, lane: str | None = None
) -> list[Chart]:
    """The oldest waiting item by lane and kind, and the run time per kind (p50, p95), over
    ``kind_minutes`` (every lane, or ``lane``'s)."""
    oldest = []
    for i, ((at, kind), spans) in enumerate(kind_minutes.kinds.items()):
        if lane is not None and at != lane:
            continue
        label = kind if lane is not None else f"{kind} ({at})"
        oldest.append(Line(f"{at}:{kind}", label, i, links.waiting(at, kind), spans, _oldest_wait))

    def worst(line: Line) -> float:
        return max((v for *_, v in line.values()), default=0.0)

    oldest = [
        Line(line.key, line.label, i, line.href, line.spans, line.value)
        for i, line in enumerate(_busiest([o for o in oldest if o.values()], worst, STYLES))
    ]
    runs = []
    per_kind = _kinds_in(kind_minutes, lane)
    ran = {k: spans for k, spans in per_kind.items() if any(sum(s.runs) for s in spans)}
    by_count = sorted(ran, key=lambda k: -sum(sum(s.runs) for s in ran[k]))[: STYLES // 2]
    for i, kind in enumerate(by_count):
        href = links.items("done", lane, **({"kind": kind} if kind != runtime.UNKNOWN_KIND else {}))
        runs.append(Line(f"{kind}:p50", f"{kind} p50", i, href, ran[kind], _run_quantile(0.5)))
        runs.append(
            Line(
                f"{kind}:p95", f"{kind} p95", i + STYLES // 2, href, ran[kind], _run_quantile(0.95)
            )
        )
    starts = kind_minutes.starts
    return [
        _draw(
            "chart-oldest",
            "Oldest waiting, by lane and kind (at each minute's first sweep)",
            oldest,
            starts,
            "log",
            seconds_text,
            _worst_wait,
        ),
        _draw(
            "chart-runs", "Run time by kind (p50, p95)", runs, starts, "log", seconds_text, _worst
        ),
    ]


def _oldest_wait(span: runtime.KindSpan) -> float | None:
    return span.oldest_wait_s


def _worst_wait(values: list[float]) -> str:
    return f"at most {seconds_text(round(max(values), 1))}" if values else "none due"


def _run_quantile(q: float) -> Callable[[runtime.KindSpan], float | None]:
    def value(span: runtime.KindSpan) -> float | None:
        return runtime.quantile(span.runs, q)

    return value
