"""The signals an error tracker hooks into, sent by the worker once per event."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.runtime.support import count, run_until, settings
from workers.worker import Worker
from workqueue import api
from workqueue.api import PermanentError
from workqueue.models import Status, WorkItem
from wqcore.logs import event_name


def _listen(signal: Any, heard: list[dict[str, Any]]) -> Any:
    def receiver(sender: Any, **kwargs: Any) -> None:
        heard.append({"sender": sender, **kwargs})

    signal.connect(receiver, weak=False)
    return receiver


def test_a_dead_letter_raises_its_signals_once(ctx) -> None:
    dead, _ = api.enqueue(ctx, "TEST_SCRIPTED", {"action": "permanent"})
    done, _ = api.enqueue(ctx, "TEST_SCRIPTED", {})
    failed: list[dict[str, Any]] = []
    lettered: list[dict[str, Any]] = []
    retried: list[dict[str, Any]] = []
    completed: list[dict[str, Any]] = []
    hooks = [
        (api.work_failed, _listen(api.work_failed, failed)),
        (api.work_dead_lettered, _listen(api.work_dead_lettered, lettered)),
        (api.work_retried, _listen(api.work_retried, retried)),
        (api.work_done, _listen(api.work_done, completed)),
    ]
    try:
        worker = Worker(settings())
        asyncio.run(
            run_until(
                worker,
                lambda: count(status=Status.FAILED) == 1 and count(status=Status.DONE) == 1,
            )
        )
    finally:
        for signal, receiver in hooks:
            signal.disconnect(receiver)
    [letter] = lettered
    assert letter["sender"] is WorkItem and letter["item"].id == dead.id
    assert letter["item"].status == Status.FAILED
    assert letter["error"] == "PermanentError: never"
    assert isinstance(letter["exception"], PermanentError)
    assert "Traceback" in letter["traceback"] and "PermanentError: never" in letter["traceback"]
    [failure] = failed
    assert failure["item"].id == dead.id and failure["dead_lettered"] is True
    assert retried == []
    assert [(c["item_id"], c["kind"]) for c in completed] == [(done.id, "TEST_SCRIPTED")]


def test_a_receiver_that_raises_changes_nothing(ctx, caplog) -> None:
    dead, _ = api.enqueue(ctx, "TEST_SCRIPTED", {"action": "permanent"})

    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("the tracker is down")

    api.work_dead_lettered.connect(broken, weak=False)
    try:
        asyncio.run(run_until(Worker(settings()), lambda: count(status=Status.FAILED) == 1))
    finally:
        api.work_dead_lettered.disconnect(broken)
    assert WorkItem.objects.using("admin").get(pk=dead.id).status == Status.FAILED
    assert [r for r in caplog.records if event_name(r) == "signal_receiver_failed"]
