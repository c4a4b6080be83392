"""``runworker --reload``: restart the worker when a source file changes, draining first.

Django's autoreloader does the watching (``django.utils.autoreload``, as ``runserver``): a parent
process starts the worker as a child with ``RUN_MAIN=true`` and starts it again each time it
exits with code 3. The child runs the worker on its main thread (its signal handlers need it) and
the reloader's watch in a thread; a changed file asks the worker to drain, as SIGTERM does, and
the child exits with code 3 once it has. The parent passes SIGTERM and SIGINT on to the child,
so a drain asked of the parent is the child's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from django.utils import autoreload

# The exit code that asks the parent for a new child (Django's).
RESTART = 3


def is_child() -> bool:
    return os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) == "true"


def run_parent() -> int:
    """Start the worker as a child until it exits with another code than ``RESTART``; that code."""
    env = {**os.environ, autoreload.DJANGO_AUTORELOAD_ENV: "true"}
    while True:
        child = subprocess.Popen(autoreload.get_child_arguments(), env=env, close_fds=False)

        def forward(signum: int, _frame: Any, child: subprocess.Popen[bytes] = child) -> None:
            child.send_signal(signum)

        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            code = child.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if code != RESTART:
            return code


class Watch:
    """The reloader's watch, in a thread of the child: ``on_change`` once, on the first changed
    file (the worker then drains; later changes wait for the next child)."""

    def __init__(self, on_change: Callable[[str], None]) -> None:
        self.changed: str | None = None
        self._on_change = on_change
        self._reloader = autoreload.get_reloader()

    def _file_changed(self, sender: Any, file_path: Any, **_: Any) -> bool:
        if self.changed is None:
            self.changed = str(file_path)
            self._on_change(self.changed)
        return True  # handled: the reloader must not exit the process itself

    def start(self) -> None:
        autoreload.file_changed.connect(self._file_changed)
        threading.Thread(
            target=self._reloader.run,
            args=(threading.main_thread(),),
            name="worker-reload-watch",
            daemon=True,
        ).start()

    def stop(self) -> None:
        self._reloader.stop()
        autoreload.file_changed.disconnect(self._file_changed)


def default_on() -> bool:
    """On when DEBUG is on and stderr is a terminal, as ``runserver``."""
    from django.conf import settings

    try:
        terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return bool(settings.DEBUG) and terminal
