"""The worker's one account of an outage, on a controlled clock: two lines per outage."""

from __future__ import annotations

import logging

import psycopg
import pytest

from workers.outage import Outage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().split(" ", 1)[0] for r in caplog.records]


def test_an_outage_is_two_lines_however_many_parts_fail(caplog) -> None:
    clock = Clock()
    outage = Outage(clock, settle_s=1.0)
    with caplog.at_level(logging.WARNING, logger="workers.outage"):
        for part in ("claim", "listen", "lease", "heartbeat", "claim"):
            assert outage.failed(part, psycopg.OperationalError("down")) is True
            clock.now += 0.3
        clock.now += 2
        outage.ok()
    assert _lines(caplog) == ["database_unreachable", "database_back"]
    assert not outage.active


def test_a_flapping_end_is_still_one_outage(caplog) -> None:
    clock = Clock()
    outage = Outage(clock, settle_s=1.0)
    with caplog.at_level(logging.WARNING, logger="workers.outage"):
        outage.failed("claim", psycopg.OperationalError("down"))
        clock.now += 0.2
        outage.ok()  # a session that outlived the failure answers once
        outage.failed("listen", TimeoutError())
        clock.now += 0.5
        outage.ok()  # not yet a second without failures
        assert outage.active
        clock.now += 0.6
        outage.ok()
    assert _lines(caplog) == ["database_unreachable", "database_back"]


def test_other_errors_are_not_an_outage(caplog) -> None:
    outage = Outage(Clock())
    with caplog.at_level(logging.WARNING, logger="workers.outage"):
        assert outage.failed("claim", ValueError("a bug")) is False
        assert outage.failed("claim", psycopg.errors.SyntaxError("bad sql")) is False
    assert caplog.records == [] and not outage.active


def test_an_answer_to_a_call_made_before_the_outage_does_not_end_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by the chaos runs: the parts fail a moment apart, so a claim sent just before the
    listener failed can answer just after; it must not log the outage as over (and then
    over again when the claim's own connection fails)."""
    clock = Clock()
    outage = Outage(clock)
    with caplog.at_level(logging.WARNING, logger="workers.outage"):
        started = outage.now()
        clock.now += 0.01
        assert outage.failed("listen", psycopg.OperationalError("server closed the connection"))
        clock.now += 0.01
        outage.ok(started)  # the claim sent before the failure answered
        assert outage.active
        clock.now += 1
        outage.ok(outage.now())  # a call made during the outage answered: it is over
        assert not outage.active
    assert [r.getMessage().split(" ", 1)[0] for r in caplog.records] == [
        "database_unreachable",
        "database_back",
    ]
