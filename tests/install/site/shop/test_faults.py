"""The queue's guarantees under faults, checked on the site's own handler as its team would
(``workers.testing.faults``, docs/howto/testing.md): its worker killed mid-handler, and a
raise after the handler's work. The install suite runs them inside the freshly made site."""

import pytest

from shop.models import Order
from workers.testing import faults

# A fault's worker sees committed rows only, as the drain's does.
pytestmark = pytest.mark.django_db(transaction=True)


def paid(number):
    return Order.objects.filter(number=number, paid=True).count()


def test_a_killed_workers_receipt_runs_again_once_and_pays_the_order_once():
    Order.objects.create(number="F-1")
    fault = faults.kill_mid_handler("SHOP_SEND_RECEIPT", {"order": "F-1"})
    faults.assert_ran_again_once(fault, side_effects=lambda: paid("F-1"))


def test_a_raise_after_the_receipt_counts_the_attempt_and_the_retry_pays_once():
    Order.objects.create(number="F-2")
    fault = faults.raise_after_side_effect("SHOP_SEND_RECEIPT", {"order": "F-2"})
    faults.assert_attempt_counted(fault)
    faults.assert_side_effect_not_retried(fault, side_effects=lambda: paid("F-2"))
