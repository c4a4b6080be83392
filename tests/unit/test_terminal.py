"""The operator's long commands' progress line (``wqcore.terminal``): on a terminal only, never
with ``--json``, rewritten in place and wiped at the end."""

from __future__ import annotations

import io
import logging

from django.core.management.base import OutputWrapper

from wqcore import terminal
from wqcore.terminal import CLEAR_TO_END, Progress


class Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_a_terminal_sees_the_line_rewritten_in_place_and_wiped(monkeypatch) -> None:
    out = Terminal(tty=True)
    progress = Progress(OutputWrapper(out))
    clock = iter([10.0, 10.05, 10.2])
    monkeypatch.setattr(terminal.time, "monotonic", lambda: next(clock))
    progress.say("requeue: 500 of 2,000")
    progress.say("requeue: 1,000 of 2,000")  # within EVERY_S of the last: not drawn
    progress.say("requeue: 1,500 of 2,000")
    progress.close()
    assert out.getvalue() == (
        f"\rrequeue: 500 of 2,000{CLEAR_TO_END}\rrequeue: 1,500 of 2,000{CLEAR_TO_END}"
        f"\r{CLEAR_TO_END}"
    )


def test_a_script_or_json_sees_nothing() -> None:
    for out, wanted in ((Terminal(tty=False), True), (Terminal(tty=True), False)):
        progress = Progress(OutputWrapper(out), wanted=wanted)
        progress.say("sweep: step 1 of 11, rescue", now=True)
        progress.close()
        assert out.getvalue() == "" and not progress.shown


def test_a_log_line_meanwhile_wipes_the_progress_first() -> None:
    out = Terminal(tty=True)
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("tests.unit.test_terminal")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with Progress(OutputWrapper(out)) as progress:
            progress.say("cancel NOOP: 500 cancelled", now=True)
            logger.warning("work_cancel_bulk cancelled=500")
            progress.say("cancel NOOP: 1,000 cancelled", now=True)
        logger.warning("after")
    finally:
        logger.removeHandler(handler)
    assert out.getvalue() == (
        f"\rcancel NOOP: 500 cancelled{CLEAR_TO_END}\r{CLEAR_TO_END}"
        "work_cancel_bulk cancelled=500\n"
        f"\rcancel NOOP: 1,000 cancelled{CLEAR_TO_END}\r{CLEAR_TO_END}after\n"
    )
