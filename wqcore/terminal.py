"""Progress for the operator's long commands (``manage.py queue requeue|discard|cancel``,
``manage.py sweep --once``): one line on stderr, rewritten in place while the command works,
and only when stderr is a terminal and the command was not asked for ``--json``. A script, a
pipe, cron or a log file sees nothing of it: what they read is the command's result on stdout,
as it was. A log line written meanwhile (to the same terminal) wipes the progress line first,
so the two never share a line."""

from __future__ import annotations

import logging
import time
from types import TracebackType

from django.core.management.base import OutputWrapper

# At most this often (seconds) is the line rewritten: a terminal over a slow link keeps up.
EVERY_S = 0.1
# Clears what is left of the line after the cursor (ANSI, which every terminal speaks).
CLEAR_TO_END = "\x1b[K"


class Progress:
    """A line of progress on ``stream`` (a command's ``self.stderr``), shown only if ``wanted``
    (not ``--json``) and ``stream`` is a terminal; else every call does nothing."""

    def __init__(self, stream: OutputWrapper, wanted: bool = True) -> None:
        self.stream = stream
        self.shown = wanted and _is_terminal(stream)
        self._last = float("-inf")
        self._drawn = False
        self._handlers: list[logging.Handler] = []

    def __enter__(self) -> Progress:
        """Wipe the line before any log record is written, while the progress is shown."""
        if self.shown:
            self._handlers = _log_handlers()
            for handler in self._handlers:
                handler.addFilter(self._before_a_record)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for handler in self._handlers:
            handler.removeFilter(self._before_a_record)
        self._handlers = []
        self.close()

    def _before_a_record(self, record: logging.LogRecord) -> bool:
        self.close()
        return True

    def say(self, text: str, *, now: bool = False) -> None:
        """Show ``text`` in place of the line (at most every ``EVERY_S``, unless ``now``)."""
        if not self.shown:
            return
        moment = time.monotonic()
        if not now and moment - self._last < EVERY_S:
            return
        self._last = moment
        self.stream.write(f"\r{text}{CLEAR_TO_END}", ending="")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Wipe the line, so what the command prints next starts on a clean one."""
        if self._drawn:
            self.stream.write(f"\r{CLEAR_TO_END}", ending="")
            self.stream.flush()
            self._drawn = False


def _log_handlers() -> list[logging.Handler]:
    """Every handler of every logger made so far (the root's and those of loggers that do not
    propagate), each once."""
    loggers = [logging.getLogger()] + [
        found
        for found in logging.Logger.manager.loggerDict.values()
        if isinstance(found, logging.Logger)
    ]
    return list({id(h): h for logger in loggers for h in logger.handlers}.values())


def _is_terminal(stream: OutputWrapper) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a stream that cannot say (closed, or no file)
        return False
