"""A dead letter's page lists every attempt in order: its worker, host, start, end, outcome, and
the error with its traceback; a tenant's staff see their own item's attempts only."""

from __future__ import annotations

import html
import re

import pytest

from tests.web.conftest import Person
from workqueue import api
from workqueue.claim import claim
from workqueue.settle import fail

pytestmark = pytest.mark.usefixtures("committed")

DEAD = "/admin/workqueue/deadletter/"


def _two_attempts(ctx, worker_rctx):  # type: ignore[no-untyped-def]
    """An item that failed once on host-a (retried) and then for good on host-b."""
    _item, _ = api.enqueue(ctx, "NOOP", {}, lane="page-attempts")
    [(item_ctx, held)] = claim(worker_rctx, "page-attempts", None, "host-a:11:aaaaaa", 30, 1)
    fail(
        item_ctx,
        held,
        "TimeoutError: the carrier did not answer",
        delay_s=0,
        traceback='Traceback (most recent call last):\n  File "carrier.py", line 7\nTimeoutError',
    )
    [(item_ctx, held)] = claim(worker_rctx, "page-attempts", None, "host-b:22:bbbbbb", 30, 1)
    return fail(
        item_ctx,
        held,
        "PermanentError: no such shipment",
        permanent=True,
        traceback='Traceback (most recent call last):\n  File "shipments.py"\nPermanentError',
    )


def _rows(page: str) -> list[str]:
    table = re.search(r'<div class="wq-section wq-history" id="attempts">(.*?)</table>', page, re.S)
    assert table, "no attempts section"
    return re.findall(r'<tr class="attempt".*?</tr>', table.group(1), re.S)


@pytest.mark.parametrize("who", ["operator", "staff"])
def test_a_dead_letters_page_lists_each_attempt_with_worker_host_and_traceback(
    who, operator: Person, member, worker_rctx
) -> None:
    staff = member()
    dead = _two_attempts(staff.ctx, worker_rctx)
    person = operator if who == "operator" else staff
    page = person.client.get(f"{DEAD}{dead.id}/change/").text
    first, second = _rows(page)
    for row, worker, host, outcome, error, where in (
        (first, "host-a:11:aaaaaa", "host-a", "Retried", "TimeoutError", "carrier.py"),
        (second, "host-b:22:bbbbbb", "host-b", "Dead-lettered", "PermanentError", "shipments.py"),
    ):
        assert f'<td class="worker">{worker}</td>' in row
        assert f'<td class="host">{host}</td>' in row
        assert f'<td class="outcome">{outcome}</td>' in row
        assert error in row and html.escape(f'File "{where}"') in row
    # The dead letter names the worker of its last attempt.
    assert "host-b:22:bbbbbb" in page.split('id="attempts"')[0]


def test_another_tenants_staff_see_neither_the_page_nor_its_attempts(member, worker_rctx) -> None:
    owner, stranger = member(), member()
    dead = _two_attempts(owner.ctx, worker_rctx)
    response = stranger.client.get(f"{DEAD}{dead.id}/change/")
    assert response.status_code in (302, 404)
    assert "host-a:11:aaaaaa" not in response.text
