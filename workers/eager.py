"""Run on commit, while developing: the process that enqueues runs the work once it committed.

For a laptop with no ``runworker`` beside it (``WORKQUEUE["RUN_ON_COMMIT"]``, refused unless
``DEBUG``). Nothing is pretended: each enqueue's lane is drained only when its transaction has
committed (``on_commit``: at once in autocommit; never for a rolled-back one), by a worker in
this process, through the same claim, fencing token, lease, handler call and settle as
``runworker`` (``workers.testing.drain``, as ``testing.inline()`` does in a test). A failing
handler's item is retried or dead-lettered as a worker would leave it; its traceback is
logged. What the handlers enqueue runs after them, in this process too.

One drain at a time per process: an enqueue committed while one runs (another request's, or a
handler's) adds its lane to what that drain runs next, and its own caller goes on without
waiting. Workers and the sweep turn it off for their process (``off``): their handlers'
enqueues are theirs to claim.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from workqueue import runtime
from wqcore.conf import tenant_alias, wq_settings
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

_UID = "workers.eager"
_lock = threading.Lock()
# Lanes (with their kinds) committed and not yet drained, and whether a drain is running.
_pending: dict[str, set[str]] = {}
_running = False


def start() -> None:
    """Run committed work in this process, when ``RUN_ON_COMMIT`` asks (the app's ready)."""
    if not wq_settings.RUN_ON_COMMIT:
        return
    if not settings.DEBUG:
        raise ImproperlyConfigured(
            "WORKQUEUE['RUN_ON_COMMIT'] runs work inside the process that enqueued it, for "
            "development only, and DEBUG is off: take it out (run workers: manage.py runworker)"
        )
    runtime.work_enqueued.connect(_enqueued, dispatch_uid=_UID)


def off() -> None:
    """Never in this process (a worker's or the sweep's: their handlers' work is claimed)."""
    runtime.work_enqueued.disconnect(dispatch_uid=_UID)


def _enqueued(sender: Any, items: Sequence[tuple[Any, str, str]], **_: Any) -> None:
    lanes: dict[str, set[str]] = {}
    for _id, kind, lane in items:
        if runtime.handler_for(kind) is not None:
            lanes.setdefault(lane, set()).add(kind)
    if lanes:
        transaction.on_commit(lambda: _run(lanes), using=tenant_alias(), robust=True)


def _run(lanes: dict[str, set[str]]) -> None:
    global _running
    with _lock:
        for lane, kinds in lanes.items():
            _pending.setdefault(lane, set()).update(kinds)
        if _running:
            return  # the drain running now takes them next
        _running = True
    try:
        while True:
            with _lock:
                if not _pending:
                    # Under the lock: a lane added after this look starts a drain of its own.
                    _running = False
                    return
                lane, kinds = _pending.popitem()
            _drain(lane, sorted(kinds))
    except BaseException:
        with _lock:
            _running = False
        raise


def _drain(lane: str, kinds: list[str]) -> None:
    from workers.testing.draining import drain

    drained = drain(lane, kinds, raise_failures=False)
    for run in drained.failures:
        log_event(
            logger,
            logging.ERROR,
            "run_on_commit_failed",
            kind=run.item.kind,
            item=str(run.item.id),
            ended=run.ended,
            exc_info=run.exception,
        )
