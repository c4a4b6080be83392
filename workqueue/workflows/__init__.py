"""Workflows: items that wait for other items (their parents) before they run.

A ``Workflow`` declares steps and the edges between them (``after``: the parent done;
``after_finished``: the parent finished however), in the shapes ``chain`` and ``group`` (with
``on_success`` / ``on_complete`` callbacks) or any other DAG, and may wait for items already
enqueued. ``enqueue_workflow`` writes it in the caller's transaction (``declare``); a step waits
as ``waiting`` until the statement that ends its last parent makes it pending, in that
statement (``workqueue/dependents.py``); ``cancel_workflow`` stops the rest (``cancel``); a
step reads how its parents ended and what they returned, page by page (``parents``).
"""

from workqueue.workflows.builder import Group, Step, Workflow
from workqueue.workflows.cancel import WorkflowCancelled, acancel_workflow, cancel_workflow
from workqueue.workflows.declare import Declared, aenqueue_workflow, enqueue_workflow
from workqueue.workflows.parents import (
    Parent,
    ParentsPage,
    acount_parents,
    aparent_results,
    aread_parents,
    count_parents,
    parent_results,
    read_parents,
)

__all__ = [
    "Declared",
    "Group",
    "Parent",
    "ParentsPage",
    "Step",
    "Workflow",
    "WorkflowCancelled",
    "acancel_workflow",
    "acount_parents",
    "aenqueue_workflow",
    "aparent_results",
    "aread_parents",
    "cancel_workflow",
    "count_parents",
    "enqueue_workflow",
    "parent_results",
    "read_parents",
]
