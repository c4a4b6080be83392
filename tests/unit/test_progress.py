"""What a handler may report (``run.progress``, ``run.set_meta``): checked at once, each bad
value refused naming the argument with nothing recorded; what the worker takes to write."""

from __future__ import annotations

import json
import math
import re
import uuid
from typing import Any

import pytest

from workqueue.fence import Fence
from workqueue.handlers import Run
from workqueue.progress import META_MAX_BYTES, NOTE_MAX, Reported, Taken


@pytest.mark.parametrize(
    ("done", "total", "note", "message"),
    [
        (-1, None, "", "done: must be a finite number from 0 to 2**53 (got -1)"),
        (math.nan, None, "", "done: must be a finite number from 0 to 2**53 (got nan)"),
        (math.inf, 10, "", "done: must be a finite number from 0 to 2**53 (got inf)"),
        (2**53 + 1, None, "", "done: must be a finite number from 0 to 2**53"),
        (True, None, "", "done: must be a number, not bool"),
        ("3", None, "", "done: must be a number, not str"),
        (None, None, "", "done: must be a number, not NoneType"),
        (1, -5, "", "total: must be a finite number from 0 to 2**53 (got -5)"),
        (1, "10", "", "total: must be a number, not str"),
        (11, 10, "", "total: must be at least done (got total 10, done 11)"),
        (1, 10, 7, "note: must be text, not int"),
        (1, 10, "x" * (NOTE_MAX + 1), f"note: must be at most {NOTE_MAX} characters"),
        (1, 10, "a\x00b", "note: must not contain a NUL character"),
        (1, 10, "\ud800", "note: must be valid Unicode (a lone surrogate)"),
    ],
)
def test_bad_progress_is_refused_by_name_and_nothing_is_recorded(
    done: Any, total: Any, note: Any, message: str
) -> None:
    run = Run()
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        run.progress(done, total, note=note)
    assert run.report.take() is None


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ([("a", 1)], "meta: must be a dict, not list"),
        ({1: "a"}, "meta: keys must be text (got 1)"),
        ({"a": math.nan}, "meta.a: NaN and infinity cannot be stored"),
        ({"a": {"b": "x\x00"}}, "meta.a.b: must not contain a NUL character"),
        ({"a": {1, 2}}, "meta: must hold JSON values only (Object of type set"),
        ({"a": "x" * META_MAX_BYTES}, "meta: this run's metadata must be at most"),
    ],
)
def test_bad_metadata_is_refused_by_name_and_nothing_is_recorded(meta: Any, message: str) -> None:
    run = Run()
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        run.set_meta(meta)
    assert run.report.take() is None


def test_the_latest_progress_replaces_the_last_and_metadata_merges() -> None:
    run = Run()
    run.progress(1, 10)
    run.progress(2.5, None, note="halfway-ish")
    run.set_meta({"file": "a.csv", "rows": (1, 2)})
    run.set_meta({"rows": 3})
    assert run.report.take() == Taken((2.5, None, "halfway-ish"), {"file": "a.csv", "rows": 3})
    assert run.report.take() is None  # nothing new since
    run.set_meta({"more": True})
    assert run.report.take() == Taken(None, {"more": True})  # the progress stays as written


def test_a_run_s_metadata_is_bounded_merged_not_per_call() -> None:
    run = Run()
    half = "x" * (META_MAX_BYTES // 2)
    run.set_meta({"a": half})
    run.set_meta({"a": half})  # replaces a key: still within the bound
    with pytest.raises(ValueError, match="meta: this run's metadata must be at most"):
        run.set_meta({"b": half})
    assert run.report.take() == Taken(None, {"a": half})


def test_a_failed_write_puts_its_report_back_under_what_came_since() -> None:
    run = Run()
    run.progress(1, 10)
    run.set_meta({"a": 1, "b": 1})
    taken = run.report.take()
    assert taken is not None
    run.set_meta({"b": 2})
    run.report.put_back(taken)
    assert run.report.take() == Taken((1, 10, ""), {"a": 1, "b": 2})
    run.progress(5, 10)
    taken = run.report.take()
    assert taken is not None
    run.progress(6, 10)
    run.report.put_back(taken)  # the newer progress wins
    assert run.report.take() == Taken((6, 10, ""), {})


def test_a_report_is_sent_as_json_objects() -> None:
    fence = Fence(uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
    sent = Reported.of(fence, Taken((450, 1000, "rows"), {"é": [1]}))
    assert json.loads(sent.progress or "") == {"done": 450, "total": 1000, "note": "rows"}
    assert json.loads(sent.meta or "") == {"é": [1]}
    assert Reported.of(fence, Taken(None, {})) == (fence, None, None)
