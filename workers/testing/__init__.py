"""Testing a site's own code: what it enqueued, and running that work inside the test.

For a site's tests (pytest-django or Django's ``TestCase``), beside ``workqueue.api``::

    from workers import testing

    def test_checkout_sends_the_receipt(client):        # @pytest.mark.django_db(transaction=True)
        client.post("/checkout/", {"order": 3})
        testing.assert_enqueued("SEND_RECEIPT", payload={"order_id": 3})
        drained = testing.drain("default")               # runs it as a worker would
        assert drained.done == 1

- ``enqueued``, ``assert_enqueued`` and ``refute_enqueued`` read what is waiting (by kind,
  lane, tenant, a payload's keys, or a ``@task``); a failed assertion lists what is there.
- ``drain(lane)`` runs every due item of the lane through a real worker in this process: the
  same claim, fencing token, lease, handler call and settle as ``runworker``, until nothing
  due is left (work the handlers enqueue included, and a workflow's steps their parents'
  completions make due). It returns what became of each item and,
  by default, fails the test with each failing handler's traceback.
- ``perform(kind, payload)`` enqueues one item in a lane of its own and runs just that one
  (what its handler returned: ``perform(...).result``, as each ``Ran`` of a drain has it).
- ``inline()`` runs each enqueue's lane as soon as its transaction commits (the work of a
  view runs before the test's next line; rolled-back work never runs).
- ``faults`` breaks an item's run as production does (its worker process killed mid-handler,
  its lease expired, a stale holder writing after a newer claim, the connection cut
  mid-settle, a raise after a side effect) and asserts what the queue guarantees then, on the
  site's own handlers: ``faults.kill_mid_handler(kind, payload)``, then
  ``faults.assert_ran_again_once(fault, side_effects=...)``.
- ``context(tenant, user)`` is an ``OpContext`` to enqueue with outside a request, and
  ``tenant(...)`` names it for the block (``@task.enqueue()``, and reads of the queue's tables
  under row-level security).

The worker runs on the queue's own connections, which see only committed rows: ``drain``,
``perform`` and ``inline`` need the test's writes committed (pytest-django's
``django_db(transaction=True)``, Django's ``TransactionTestCase``); inside a test's
transaction they say so and run nothing. ``enqueued`` and its assertions work in both.
"""

from workers.testing import faults
from workers.testing.draining import Drained, DrainFailed, Ran, drain, inline, perform
from workers.testing.enqueued import assert_enqueued, enqueued, refute_enqueued
from workers.testing.tenants import context, tenant

__all__ = [
    "DrainFailed",
    "Drained",
    "Ran",
    "assert_enqueued",
    "context",
    "drain",
    "enqueued",
    "faults",
    "inline",
    "perform",
    "refute_enqueued",
    "tenant",
]
