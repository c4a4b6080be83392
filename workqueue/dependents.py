"""What ending an item, or requeuing a dead one, does to the items that wait for it (a
workflow's edges: ``workqueue_dependency``).

Whether an edge is met follows from its parent's status: done meets every edge; failed for
good, cancelled or discarded meet those a child needs ``finished``. So every statement that
changes an item so includes ``{move_dependents}`` (``sql/move_dependents.sql``) over those items
(its ``parent_items``): each waiting child's count of unmet edges (``waiting_on``) goes down by
the edges that change met, and a child reaching 0 becomes pending and is announced, in that
statement. A dead item requeued unmeets what needs it finished: those children wait for its new
end again (unless they have run already). Only items that are some item's parent
(``has_dependents``) pay for it; no edge is ever written after its declaration.
"""

from __future__ import annotations

from workqueue import SQL_DIR
from wqcore.statements import NoParams, Statement


def _moving(needs: str, delta: int) -> Statement:
    parts = {"needs": f"'{{{needs}}}'::text[]", "delta": str(delta)}
    return Statement("move_dependents", NoParams, SQL_DIR, build_parts=lambda: parts)


# For statements that end items done: every edge of theirs is met.
RELEASE_DONE = _moving("done,finished", -1)
# For statements that end items otherwise (failed for good, cancelled, discarded): the edges a
# child needs ``finished`` are met; those it needs ``done`` hold it.
RELEASE_ENDED = _moving("finished", -1)
# For statements that requeue dead items: what needs them finished waits for them again.
HOLD_REQUEUED = _moving("finished", 1)
