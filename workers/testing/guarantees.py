"""What the queue guarantees under a fault (``faults.py``), each as an assertion on a ``Fault``
whose failure says what went wrong and what to change.

``side_effects`` (each assertion's optional argument, required by
``assert_side_effect_not_retried``): a callable that counts what the handler did that must
happen once (mails enqueued, rows written, charges made), read after the fault. The queue
runs an item at least once: a fault may run a handler again, and only the handler can make
the second run repeat nothing (an idempotency key, the outbox, a compare-and-set on its
record's version, ``run.mark_side_effect()``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from workers.testing.draining import Ran
from workers.testing.held import STALE_NOTE
from workqueue import runtime
from wqcore.scope import system_scope

type SideEffects = Callable[[], int]

# The item's columns a stale holder could have written: each must be as the newer claim left it.
_HELD_COLUMNS = (
    "status",
    "claim_token",
    "attempts",
    "result",
    "last_error",
    "progress",
    "updated_at",
)


@dataclass(frozen=True)
class Fault:
    """What became of an item under a fault: the item and its attempts as the fault left
    them, and its run after the fault (``rerun``: None when it did not run again).

    ``newer``: the item as the newer claim left it, before the stale holder woke;
    ``refused``: the writes of the stale holder the worker was refused, by event
    (``stale_complete_refused``, ``stale_progress_refused``); ``at_cut``: the item and its
    attempts while its worker's session was cut; ``cut``: the sessions ended;
    ``first``: the first run, when the fault ran it in this process."""

    what: str
    item: runtime.WorkItem
    attempts: list[runtime.Attempt]
    rerun: Ran | None
    newer: runtime.WorkItem | None = None
    refused: tuple[str, ...] = ()
    at_cut: tuple[runtime.WorkItem, list[runtime.Attempt]] | None = None
    cut: int = 0
    first: Ran | None = None

    def describe(self) -> str:
        """The item and each attempt in one line each, for a failure's message."""
        lines = [
            f"{self.item.kind} {self.item.id}: {self.item.status}, {self.item.attempts} attempt(s)"
        ]
        for a in self.attempts:
            error = f": {a.error.splitlines()[0]}" if a.error else ""
            lines.append(f"  attempt {a.attempt}: {a.outcome}{error}")
        return "\n".join(lines)


def read_item(item_id: uuid.UUID) -> runtime.WorkItem:
    with system_scope() as alias:
        return runtime.WorkItem.objects.using(alias).get(pk=item_id)


def read_attempts(item_id: uuid.UUID) -> list[runtime.Attempt]:
    with system_scope() as alias:
        return list(
            runtime.Attempt.objects.using(alias).filter(item_id=item_id).order_by("attempt", "id")
        )


def _fail(fault: Fault, said: str) -> None:
    raise AssertionError(f"{said}\n\n{fault.describe()}")


def _once(fault: Fault, side_effects: SideEffects | None, why: str) -> None:
    if side_effects is None:
        return
    n = side_effects()
    if n != 1:
        _fail(fault, f"the side effect happened {n} time(s), not once: {why}")


def _rerun_failed(fault: Fault) -> str:
    run = fault.rerun
    if run is None or run.exception is None:
        return ""
    return f" ({type(run.exception).__name__}: {run.exception})"


def assert_ran_again_once(fault: Fault, side_effects: SideEffects | None = None) -> None:
    """The item ran once more after the fault, to its end: two attempts on record, the first
    ended by the fault (its attempt spent: ``holder_gone``, ``lease_expired``), the second
    done. With ``side_effects``: what the handler does happened once, not once per run."""
    if fault.rerun is None or len(fault.attempts) < 2:
        _fail(fault, f"the item did not run again after the fault ({fault.what})")
    if len(fault.attempts) > 2:
        _fail(fault, f"the item ran {len(fault.attempts) - 1} more times after the fault, not once")
    first, second = fault.attempts
    if first.outcome == runtime.AttemptOutcome.DONE:
        _fail(fault, f"the fault ({fault.what}) did not end the first run: it completed")
    if second.outcome != runtime.AttemptOutcome.DONE or fault.item.status != runtime.Status.DONE:
        _fail(
            fault,
            f"the item ran again after the fault ({fault.what}) but its handler failed on the "
            f"second run{_rerun_failed(fault)}. Its first run may have made its writes before the "
            "fault (rows committed, work enqueued): a handler must be safe to run again, finding "
            "what its first run did (key it by the item's id) rather than failing on it",
        )
    _once(
        fault,
        side_effects,
        f"the item ran again after the fault ({fault.what}), as the queue guarantees (at least "
        "once), and the handler repeated what its first run had done. Make the second run "
        "repeat nothing: an idempotency key derived from the item's id on what it enqueues, the "
        "outbox in its own transaction, a compare-and-set on the record's version",
    )


def assert_stale_write_refused(fault: Fault, side_effects: SideEffects | None = None) -> None:
    """The stale holder's writes to the item (its completion, its progress) were refused by
    the fence: the item is as the newer claim left it. With ``side_effects``: the stale
    holder's handler, whose writes elsewhere are the site's to fence, repeated nothing."""
    if fault.newer is None:
        raise TypeError("assert_stale_write_refused takes a fault of expire_lease or stale_holder")
    if not fault.refused:
        _fail(
            fault,
            "the stale holder wrote nothing the fence had to refuse: it never tried (its "
            "handler did not end), so this run shows nothing about the fence",
        )
    for column in _HELD_COLUMNS:
        newer, now = getattr(fault.newer, column), getattr(fault.item, column)
        if newer != now:
            _fail(
                fault,
                f"the stale holder's write reached the item: its {column} was {newer!r} after "
                f"the newer claim and is {now!r} now",
            )
    if STALE_NOTE in str(fault.item.progress):
        _fail(fault, "the stale holder's progress report reached the item")
    _once(
        fault,
        side_effects,
        "the stale holder's handler ran after the newer claim's and repeated its work. The "
        "fence refuses its writes to the item, never what it writes elsewhere: key them (an "
        "idempotency key from the item's id) or make them a compare-and-set on the record's "
        "version, so a late run changes nothing",
    )


def assert_settled_whole(fault: Fault, side_effects: SideEffects | None = None) -> None:
    """Nothing was half-written by the cut: while the session was gone, the item still held
    its claim, with no result and no attempt ended; then it settled once (done, one attempt)
    or ran again (``kill``: the cut attempt handed back, a second one done). With
    ``side_effects``: the handler's work happened once."""
    if fault.at_cut is None:
        raise TypeError("assert_settled_whole takes a fault of cut_mid_settle")
    if not fault.cut:
        _fail(fault, "no session was cut: the settle never reached the locked row")
    item, attempts = fault.at_cut
    if item.status != runtime.Status.CLAIMED or item.result is not None or attempts:
        _fail(
            fault,
            f"the cut settle left part of its outcome: while its session was gone the item was "
            f"{item.status}, result {item.result!r}, {len(attempts)} attempt(s) ended",
        )
    outcomes = [a.outcome for a in fault.attempts]
    if fault.item.status != runtime.Status.DONE or outcomes.count(runtime.AttemptOutcome.DONE) != 1:
        _fail(fault, "the item did not settle once after the cut (done, one attempt done)")
    _once(
        fault,
        side_effects,
        "the settle was cut, and the handler's work was done again. The worker cannot know "
        "whether a cut statement landed: the item may run again, and its second run must "
        "repeat nothing (an idempotency key from the item's id, the outbox)",
    )


def assert_attempt_counted(fault: Fault) -> None:
    """The attempt that raised was spent and recorded with its error: the item's attempts
    count it, and its record says what the handler raised."""
    if not fault.attempts or not fault.attempts[0].error:
        _fail(fault, "the attempt that raised is not on record with its error")
    first = fault.attempts[0]
    if first.outcome not in (runtime.AttemptOutcome.RETRIED, runtime.AttemptOutcome.DEAD_LETTERED):
        _fail(fault, f"the attempt that raised ended {first.outcome}, not retried or dead-lettered")
    if fault.item.attempts < len(fault.attempts):
        _fail(
            fault,
            f"the item counts {fault.item.attempts} attempt(s) for {len(fault.attempts)} run(s)",
        )


def assert_side_effect_not_retried(fault: Fault, side_effects: SideEffects) -> None:
    """A failure after the side effect did not repeat it: either the queue did not retry
    (the handler had marked it: a dead letter for a human) or the retry found it done (an
    idempotency key, the outbox). Either way ``side_effects`` counts one."""
    assert_attempt_counted(fault)
    marked = fault.attempts[0].outcome == runtime.AttemptOutcome.DEAD_LETTERED
    if marked and fault.rerun is not None:
        _fail(fault, "the item was dead-lettered after its side effect and still ran again")
    if not marked and fault.item.status != runtime.Status.DONE:
        _fail(
            fault,
            f"the item was retried after the raise and the retry did not complete"
            f"{_rerun_failed(fault)}: a retry after a side effect must find it done and go on, "
            "not fail on it",
        )
    _once(
        fault,
        side_effects,
        "the handler raised after its side effect, the queue retried the item (the attempt "
        "counted), and the retry did it again. Either make the retry find it done (an "
        "idempotency key from the item's id on what it enqueues, the outbox in the handler's "
        "transaction), or mark it (run.mark_side_effect()) so a failure after it goes to a "
        "human as a dead letter instead of a retry",
    )
