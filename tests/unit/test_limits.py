"""Time limits and snooze: the rules, without a database (issue 20)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from tests.runtime.support import ROOT
from workqueue.api import Kind, Payload, Run
from workqueue.handlers import Snoozed, time_limit


class P(Payload):
    n: int = 0


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, True, "10", 8 * 86400])
def test_a_kind_refuses_a_timeout_out_of_range(bad: object) -> None:
    with pytest.raises(ValueError, match="timeout must be 0 \\(no limit\\)"):
        Kind("TEST_BAD_TIMEOUT", P, timeout=bad)  # type: ignore[arg-type]


def test_a_kinds_limit_its_own_or_the_sites_and_0_is_none(settings) -> None:  # type: ignore[no-untyped-def]
    assert Kind("TEST_OWN", P, timeout=2).time_limit_s() == 2.0
    assert Kind("TEST_NONE", P, timeout=0).time_limit_s() is None
    settings.WORKQUEUE = {**settings.WORKQUEUE, "KIND_TIMEOUT_S": 90}
    assert Kind("TEST_DEFAULT", P).time_limit_s() == 90.0
    settings.WORKQUEUE = {**settings.WORKQUEUE, "KIND_TIMEOUT_S": 0}
    assert Kind("TEST_DEFAULT", P).time_limit_s() is None


def test_a_handlers_own_limit_per_item_comes_first() -> None:
    class Own:
        def timeout_for(self, item):  # type: ignore[no-untyped-def]
            return item.payload.get("t")

        def handle(self, ctx, item, run) -> None: ...  # type: ignore[no-untyped-def]

    class Item:
        kind = "NOOP"
        payload: dict = {"t": 7}

    assert time_limit(Own(), Item()) == 7.0  # type: ignore[arg-type]
    Item.payload = {"t": 0}
    assert time_limit(Own(), Item()) is None  # type: ignore[arg-type]


def test_snooze_raises_and_remembers_and_refuses_bad_seconds() -> None:
    run = Run()
    with pytest.raises(Snoozed):
        run.snooze(30)
    assert run.snoozed_s == 30.0
    for bad in (-1, math.nan, 86_401, "5", None):
        fresh = Run()
        with pytest.raises(ValueError, match=r"^seconds: "):
            fresh.snooze(bad)  # type: ignore[arg-type]
        assert fresh.snoozed_s is None


def test_runworker_help_prints_the_default_time_limit() -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "runworker", "--help"],
        cwd=ROOT,
        env={**os.environ, "WORKQUEUE_KIND_TIMEOUT_S": "45"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "KIND_TIMEOUT_S = 45.0" in done.stdout
