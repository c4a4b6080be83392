"""The site's own tests, as a Django team writes them with pytest-django and the queue's testing
helpers (``workers.testing``): what a view enqueued, the work run in the test, a failure's
traceback. The install suite runs them inside the freshly made site."""

import pytest

from shop.models import Order
from shop.tasks import order_count
from workers import testing

# The helpers' worker sees committed rows only (docs/howto/testing.md).
pytestmark = pytest.mark.django_db(transaction=True)


def test_checkout_enqueues_the_receipt_and_the_drain_marks_the_order_paid(client):
    assert client.post("/checkout/", {"number": "A-1"}).status_code == 200
    testing.assert_enqueued("SHOP_SEND_RECEIPT", payload={"order": "A-1"}, count=1)
    drained = testing.drain("default")
    assert drained.counts() == {"done": 1}
    assert Order.objects.get(number="A-1").paid


def test_a_view_that_fails_leaves_no_work(client):
    with pytest.raises(RuntimeError):
        client.post("/checkout/", {"number": "A-2", "then": "fail"})
    testing.refute_enqueued("SHOP_SEND_RECEIPT")
    assert testing.drain("default").ran == []


def test_a_failing_handler_fails_the_test_with_its_traceback(client):
    client.post("/checkout/", {"number": "bad"})
    with pytest.raises(testing.DrainFailed) as failed:
        testing.drain("default")
    assert "PermanentError: no order bad" in str(failed.value)
    assert "shop/work.py" in str(failed.value)  # the handler's own frame


def test_inline_runs_the_views_work_before_the_next_line(client):
    with testing.inline():
        client.post("/checkout/", {"number": "A-3"})
        assert Order.objects.get(number="A-3").paid


def test_the_handler_alone():
    Order.objects.create(number="A-4")
    run = testing.perform("SHOP_SEND_RECEIPT", {"order": "A-4"})
    assert run.ended == "done" and Order.objects.get(number="A-4").paid


def test_the_report_task_runs_in_a_drain(client):
    Order.objects.create(number="R-1")
    task_id = client.post("/report/", {"prefix": "R-"}).json()["task"]
    testing.assert_enqueued(task=order_count, count=1)
    assert testing.drain("default").done == 1
    with testing.tenant():
        assert order_count.get_result(task_id).return_value == 1
