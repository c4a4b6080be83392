"""The gauges page's charts as geometry (``workers/charts.py``), before any page draws them: a
point per span, a line broken where a span has no claim, axes that fit the figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workers.charts import Links, charts, seconds_text
from workqueue.minutes import WAIT_BOUNDS_S, Minutes, Span

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _minutes() -> Minutes:
    starts = [START + timedelta(minutes=i) for i in range(5)]
    waits = [0] * (len(WAIT_BOUNDS_S) + 1)
    waits[4] = 3  # 100 to 250 ms
    fast = [Span(s) for s in starts]
    fast[1] = Span(starts[1], done=3, failed=2, dead=1, pending=7, waits=tuple(waits))
    fast[3] = Span(starts[3], done=12, pending=4, waits=tuple(waits))
    slow = [Span(s, pending=2) for s in starts]
    return Minutes(60, starts, {"fast": fast, "slow": slow})


def test_each_series_has_a_point_per_span_and_waits_only_where_claims_ended() -> None:
    attempts, waits, depth = charts(_minutes(), Links(START))
    done = next(s for s in attempts.series if s.key == "done")
    assert [p.value for p in done.points] == [0, 3, 0, 12, 0]
    assert [p.data for p in done.points] == ["0", "3", "0", "12", "0"]
    assert done.summary == "15 in all" and "status__exact=done" in done.href
    dead = next(s for s in attempts.series if s.key == "dead")
    assert "failed_since=2026-12-01T09%3A00%3A00%2B00%3A00" in dead.href
    # The y axis tops out on a round number above the busiest span.
    assert [label for _, label in attempts.y_ticks] == ["0", "10", "20"]
    p50 = next(s for s in waits.series if s.key == "p50")
    assert [(p.i, p.value, p.text) for p in p50.points] == [
        (1, 0.25, "250 ms"),
        (3, 0.25, "250 ms"),
    ]
    assert p50.path.count("M") == 2 and "L" not in p50.path  # no line across the empty span
    assert waits.scale == "log" and [label for _, label in waits.y_ticks][:2] == ["10 ms", "100 ms"]
    assert {s.key: max(p.value for p in s.points) for s in depth.series} == {"fast": 7, "slow": 2}


def test_one_lane_narrows_every_chart_and_its_links() -> None:
    attempts, _, depth = charts(_minutes(), Links(START, "slow"), "slow")
    assert sum(p.value for s in attempts.series for p in s.points) == 0
    assert [s.key for s in depth.series] == ["slow"]
    assert all("lane=slow" in s.href for s in attempts.series)


def test_waits_read_as_people_say_them() -> None:
    assert [seconds_text(s) for s in (0.025, 2.5, 150.0, 10800.0)] == [
        "25 ms",
        "2.5 s",
        "2.5 min",
        "3 h",
    ]
