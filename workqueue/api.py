"""What a site's code calls: enqueue work (and workflows of it), declare kinds and their handlers,
cancel, hear outcomes, read results and where an item stands (``status_of``); and name a tenant
outside a request (``tenant``, ``context``).

This is the queue's whole public face for a site (a test pins its names); its tests call
``workers.testing`` beside it. Each call that touches the database comes in a pair: the sync
one joins the caller's transaction on Django's connection (an enqueue in a view commits or rolls
back with the view), the async one (``a...``) runs on the queue's own connections.

Workers, the outbox and the sweep call the runtime face (``workqueue.runtime``), not this one.
"""

from tenancy.naming import context, tenant
from workqueue.cancel import acancel, acancel_matching, cancel, cancel_matching
from workqueue.enqueue import NewItem, Outcome, aenqueue, enqueue
from workqueue.enqueue_many import aenqueue_many, enqueue_many
from workqueue.erase import erase
from workqueue.exceptions import Conflict, InvalidPayload, NotFound, WorkQueueError
from workqueue.handlers import PermanentError, RetryableError, Run, handles
from workqueue.kinds import Kind, Payload, register
from workqueue.models import Status, WorkItem
from workqueue.results import aresult_of, aresults_of, result_of, results_of
from workqueue.rules import RetryPolicy
from workqueue.signals import work_dead_lettered, work_done, work_failed, work_retried
from workqueue.statuses import NOT_DONE, ItemStatus, astatus_of, status_of
from workqueue.workflows import (
    Workflow,
    acancel_workflow,
    acount_parents,
    aenqueue_workflow,
    aparent_results,
    aread_parents,
    cancel_workflow,
    count_parents,
    enqueue_workflow,
    parent_results,
    read_parents,
)

__all__ = [
    "NOT_DONE",
    "Conflict",
    "InvalidPayload",
    "ItemStatus",
    "Kind",
    "NewItem",
    "NotFound",
    "Outcome",
    "Payload",
    "PermanentError",
    "RetryPolicy",
    "RetryableError",
    "Run",
    "Status",
    "WorkItem",
    "WorkQueueError",
    "Workflow",
    "acancel",
    "acancel_matching",
    "acancel_workflow",
    "acount_parents",
    "aenqueue",
    "aenqueue_many",
    "aenqueue_workflow",
    "aparent_results",
    "aread_parents",
    "aresult_of",
    "aresults_of",
    "astatus_of",
    "cancel",
    "cancel_matching",
    "cancel_workflow",
    "context",
    "count_parents",
    "enqueue",
    "enqueue_many",
    "enqueue_workflow",
    "erase",
    "handles",
    "parent_results",
    "read_parents",
    "register",
    "result_of",
    "results_of",
    "status_of",
    "tenant",
    "work_dead_lettered",
    "work_done",
    "work_failed",
    "work_retried",
]
