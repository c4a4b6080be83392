"""The outage account: one line when the database goes away, one when it is back."""

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
