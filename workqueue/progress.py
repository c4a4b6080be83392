"""Progress and metadata: what a running handler says about its item, and how it is written.

A handler calls ``run.progress(done, total, note=...)`` and ``run.set_meta({...})``
(``workqueue.handlers.Run``). Each only records the latest value in the run's ``Report``, in
memory: checked at once (a bad value raises ``ValueError`` naming the argument, and nothing is
recorded), no I/O, safe from a handler's thread and from the event loop alike, so a loop may
report on every row. The worker's reporter (``workers/reporting.py``) takes what changed and
writes it with ``write_progress``: at most once per ``WORKER_PROGRESS_FLUSH_S`` per item, and
once more before the item's outcome is written.

Stored on the item: ``progress`` replaced by each write (``{"done", "total", "note", "at"}``,
``at`` the database's clock), ``meta`` merged key by key (``jsonb ||``: a key set again is
replaced, a key not named is kept, across attempts too). Both are kept after the item ends.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from workqueue import SQL_DIR
from workqueue.fence import Fence
from workqueue.inputs import find_unstorable
from workqueue.settle import count_refused
from wqcore.arrays import TextArray
from wqcore.statements import Statement
from wqcore.store import Plan, System, transition

# The longest note, in characters: a line an operator reads in the admin's list.
NOTE_MAX = 200
# The largest a run's metadata may grow (everything it set, merged), as JSON in bytes: it is
# written again with every report and returned with every claim of the item.
META_MAX_BYTES = 16_384
# The largest count: exact as a JSON number everywhere (a double holds every integer up to it).
COUNT_MAX = 2**53

type Count = int | float
# A run's progress as checked: (done, total or None, note).
type Progress = tuple[Count, Count | None, str]


def _count(name: str, value: object) -> Count:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: must be a number, not {type(value).__name__}")
    if not 0 <= value <= COUNT_MAX:  # also refuses NaN
        raise ValueError(f"{name}: must be a finite number from 0 to 2**53 (got {value!r})")
    return value


def check_progress(done: object, total: object, note: object) -> Progress:
    """A report of progress as it is stored, or ``ValueError`` naming the argument to change."""
    counted = _count("done", done)
    whole = None if total is None else _count("total", total)
    if whole is not None and whole < counted:
        raise ValueError(f"total: must be at least done (got total {total!r}, done {done!r})")
    if not isinstance(note, str):
        raise ValueError(f"note: must be text, not {type(note).__name__}")
    if len(note) > NOTE_MAX:
        raise ValueError(f"note: must be at most {NOTE_MAX} characters (got {len(note)})")
    # The usual note is plain ASCII: only another is walked for what jsonb cannot hold.
    if (not note.isascii() or "\x00" in note) and (problem := find_unstorable(note, "note")):
        raise ValueError(problem)
    return counted, whole, note


def check_meta(meta: object) -> dict[str, Any]:
    """Metadata as it is stored (JSON values, text keys), or ``ValueError`` naming what to
    change."""
    if not isinstance(meta, Mapping):
        raise ValueError(f"meta: must be a dict, not {type(meta).__name__}")
    for key in meta:
        if not isinstance(key, str):
            raise ValueError(f"meta: keys must be text (got {key!r})")
    if problem := find_unstorable(dict(meta), "meta"):
        raise ValueError(problem)
    try:
        # Tuples become lists, as they will read back.
        checked: dict[str, Any] = json.loads(_json(dict(meta)))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"meta: must hold JSON values only ({exc})") from None
    return checked


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class Taken(NamedTuple):
    """What a report held when the reporter took it: the latest progress (None: unchanged
    since the last take) and the metadata set since then (empty: none)."""

    progress: Progress | None
    meta: dict[str, Any]


class Report:
    """What a run reported and its worker has not written yet: the latest progress, and the
    metadata set since the last write, merged. Set from the handler (its thread, or the
    loop), taken by the worker's reporter on the loop: behind a lock, each a few assignments."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._meta: dict[str, Any] = {}
        # Everything this run set, merged: what bounds its size (META_MAX_BYTES).
        self._run_meta: dict[str, Any] = {}
        self._changed = False

    def progress(self, done: object, total: object = None, note: object = "") -> None:
        """Record the latest progress (``check_progress``); the previous one is replaced."""
        value = check_progress(done, total, note)
        with self._lock:
            self._progress = value
            self._changed = True

    def merge_meta(self, meta: object) -> None:
        """Merge ``meta`` (``check_meta``) into what this run set, within ``META_MAX_BYTES``."""
        checked = check_meta(meta)
        with self._lock:
            merged = self._run_meta | checked
            size = len(_json(merged).encode())
            if size > META_MAX_BYTES:
                raise ValueError(
                    f"meta: this run's metadata must be at most {META_MAX_BYTES} bytes as JSON "
                    f"(it would be {size})"
                )
            self._run_meta = merged
            self._meta.update(checked)
            self._changed = True

    @property
    def changed(self) -> bool:
        """Whether something was reported since the last take."""
        return self._changed

    def take(self) -> Taken | None:
        """What was reported since the last take (None: nothing), to be written."""
        with self._lock:
            if not self._changed:
                return None
            taken = Taken(self._progress, self._meta)
            self._progress, self._meta, self._changed = None, {}, False
        return taken

    def put_back(self, taken: Taken) -> None:
        """A write of ``taken`` failed: keep it for the next, under what came since."""
        with self._lock:
            if self._progress is None:
                self._progress = taken.progress
            self._meta = taken.meta | self._meta
            self._changed = True


class Reported(NamedTuple):
    """One item's report as ``write_progress`` sends it: its fence, its progress as a JSON
    object (None: keep the stored one), its metadata to merge as a JSON object (None: none)."""

    fence: Fence
    progress: str | None
    meta: str | None

    @classmethod
    def of(cls, fence: Fence, taken: Taken) -> Reported:
        progress = None
        if taken.progress is not None:
            done, total, note = taken.progress
            progress = _json({"done": done, "total": total, "note": note})
        return cls(fence, progress, _json(taken.meta) if taken.meta else None)


class WriteProgressParams(NamedTuple):
    org_ids: list[uuid.UUID]
    ids: list[uuid.UUID]
    tokens: list[uuid.UUID]
    progress: TextArray
    meta: TextArray


WRITE_PROGRESS = Statement("write_progress", WriteProgressParams, SQL_DIR)


@transition
def write_progress(reports: Iterable[Reported]) -> Plan[set[uuid.UUID]]:
    """Write each report to its item, if its fence's claim token still holds it: the progress
    replaced (stamped with the database's ``now()``), the metadata merged; returns the ids
    written. An id missing from the result was refused (a stale holder: counted, nothing
    changed). Runs on the system login across tenants, as ``complete_many`` does: the token,
    with the org and the id, is the fence, and one statement writes every item a worker holds.
    """
    sent = list(reports)
    if not sent:
        return set()
    params = WriteProgressParams(
        [r.fence.org_id for r in sent],
        [r.fence.item_id for r in sent],
        [r.fence.claim_token for r in sent],
        TextArray([r.progress for r in sent]),
        TextArray([r.meta for r in sent]),
    )
    rows = yield System(WRITE_PROGRESS, params)
    written = set(rows.column(0))
    count_refused("write_progress", len({r.fence.item_id for r in sent} - written))
    return written


awrite_progress = write_progress.aio
