"""What ending an item does to the items that wait for it (a workflow's edges).

Every statement that ends an item (done, failed for good, cancelled, discarded) includes
``{release_dependents}`` (``sql/release_dependents.sql``) over the items it ended: their
edges are met as their end allows (any edge when done; else only those a child needs
``finished``), each waiting child's count of unmet edges goes down by the edges met, and a
child whose count reaches 0 becomes pending and is announced, all in that statement. Only
items that are some item's parent (``has_dependents``) pay for it.
"""

from __future__ import annotations

from workqueue import SQL_DIR
from wqcore.statements import NoParams, Statement

# For statements that end items done: every edge of theirs is met.
RELEASE_DONE = Statement(
    "release_dependents", NoParams, SQL_DIR, build_parts=lambda: {"done": "true"}
)
# For statements that end items otherwise (failed for good, cancelled, discarded): only the
# edges a child needs ``finished`` are met; those it needs ``done`` hold it.
RELEASE_ENDED = Statement(
    "release_dependents", NoParams, SQL_DIR, build_parts=lambda: {"done": "false"}
)
