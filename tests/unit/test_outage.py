"""The worker's one account of an outage, on a controlled clock: two lines per outage."""

from __future__ import annotations

import logging

import psycopg
import pytest

from workers.outage import Outage
from wqcore.logs import event_text


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


# --- the driver's own warnings, folded in (issue 21) ------------------------------------------


def _pool_warning(message: str, *args: object) -> None:
    logging.getLogger("psycopg.pool").warning(message, *args)


def test_the_pools_failed_connects_are_the_outages_one_line(caplog) -> None:
    """psycopg.pool logs "error connecting in 'pool': ..." on every attempt (about 15 in a
    30 s outage): the first is the outage's database_unreachable, the rest and the pool's
    other lost-connection warnings are dropped while it lasts."""
    from workers.outage import fold_driver_warnings

    clock = Clock()
    outage = Outage(clock, settle_s=1.0)
    unfold = fold_driver_warnings(outage)
    try:
        with caplog.at_level(logging.INFO):
            for _ in range(15):
                down = psycopg.OperationalError("connection refused")
                _pool_warning("error connecting in %r: %s", "pool-1", down)
                clock.now += 2
            _pool_warning("discarding broken connection: %s", "<conn>")
            logging.getLogger("psycopg").warning(
                "error ignored terminating %r: %s",
                "<pipeline>",
                psycopg.OperationalError("the connection is lost"),
            )
            _pool_warning("reconnection attempt in pool %r failed after %s sec", "pool-1", 30)
            clock.now += 2
            outage.ok()
    finally:
        unfold()
    assert [r.getMessage().split(" ", 1)[0] for r in caplog.records] == [
        "database_unreachable",
        "database_back",
    ], [r.getMessage() for r in caplog.records]
    assert event_text(caplog.records[0]).startswith('database_unreachable part="pool" ')
    assert not any(r.exc_info for r in caplog.records)


def test_outside_an_outage_the_pools_other_lines_still_log(caplog) -> None:
    from workers.outage import fold_driver_warnings

    outage = Outage(Clock())
    unfold = fold_driver_warnings(outage)
    try:
        with caplog.at_level(logging.INFO):
            # One broken connection found in the pool, the database fine: the pool's own line.
            _pool_warning("discarding broken connection: %s", "<conn>")
            # Not about a lost connection at all.
            _pool_warning("rolling back returned connection: %s", "<conn>")
    finally:
        unfold()
    assert [r.name for r in caplog.records] == ["psycopg.pool", "psycopg.pool"]
    assert not outage.active
    # Taken off again: nothing is left filtering a logger after the worker stopped.
    assert logging.getLogger("psycopg.pool").filters == []


def test_a_wrapped_admin_shutdown_is_a_server_gone_away() -> None:
    """PostgreSQL's "terminating connection due to administrator command", as Django wraps it
    and a caller wraps Django's: still the database not answering, not a bug."""
    from django.db import OperationalError as DjangoOperationalError

    from workers.outage import is_unreachable

    shutdown = psycopg.errors.AdminShutdown("terminating connection")
    try:
        try:
            raise DjangoOperationalError("terminating connection") from shutdown
        except DjangoOperationalError as django_error:
            raise RuntimeError("the sweep's step failed") from django_error
    except RuntimeError as outer:
        assert is_unreachable(outer)
    assert not is_unreachable(RuntimeError("a bug"))


def test_the_end_of_an_outage_names_the_server_and_the_one_before_when_it_changed(caplog) -> None:
    """A failover: the parts that hold sessions reached another server than before the outage
    (a multi-host URL's standby, promoted); ``database_back`` says which, and which before. A
    restart of the same server names it alone."""
    clock = Clock()
    outage = Outage(clock, settle_s=1.0)
    with caplog.at_level(logging.WARNING, logger="workers.outage"):
        outage.connected("10.0.0.1:5432")
        for server in ("10.0.0.2:5432", "10.0.0.2:5432"):
            outage.failed("listen", psycopg.OperationalError("server closed the connection"))
            clock.now += 0.5
            outage.connected(server)
            clock.now += 2
            outage.ok()
    assert [event_text(r) for r in caplog.records if "database_back" in r.getMessage()] == [
        'database_back after_s=2.5 failures=1 server="10.0.0.2:5432" was="10.0.0.1:5432"',
        'database_back after_s=2.5 failures=1 server="10.0.0.2:5432"',
    ]
    assert outage.began == 2


def test_a_refusal_the_server_answered_names_its_sqlstate(caplog) -> None:
    """A full disk or a lock timeout is the server answering: its code says which."""
    outage = Outage(Clock())
    refusal = psycopg.errors.DiskFull('could not extend file "base/1/2": No space left on device')
    wrapped = RuntimeError("the store's")
    wrapped.__cause__ = refusal
    with caplog.at_level(logging.WARNING, logger="workers.outage"):
        assert outage.failed("complete", wrapped) is True
    [line] = [event_text(r) for r in caplog.records]
    assert line.startswith('database_unreachable part="complete" error="'), line
    assert line.endswith(' sqlstate="53100"'), line
