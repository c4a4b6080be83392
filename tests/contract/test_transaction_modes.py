"""No tenant setting outlives its scope, under any transaction mode a caller may use: autocommit,
an enclosing ``atomic()``, nested scopes, and autocommit turned off by hand (issue 8.4); nor
does the claim's plan setting."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connections, transaction

from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from workqueue import api
from workqueue.claim import claim
from workqueue.models import WorkItem
from workqueue.settle import complete, fail, release

pytestmark = pytest.mark.usefixtures("committed")


def _tenant_now() -> str:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT current_setting('app.org_id', true)")
        return cursor.fetchone()[0] or ""


def _visible() -> int:
    """Items the everyday login sees with no scope open: none, if no tenant leaked."""
    return WorkItem.objects.using("default").count()


@pytest.fixture
def manual(committed: None) -> Iterator[None]:
    """The everyday login's connection with autocommit off, as a caller may set it."""
    connection = connections["default"]
    connection.set_autocommit(False)
    try:
        yield
    finally:
        connection.rollback()
        connection.set_autocommit(True)


@pytest.mark.usefixtures("manual")
def test_a_scope_under_manual_transactions_leaves_no_tenant(ctx: OpContext) -> None:
    api.enqueue(ctx, "NOOP", {})
    with tenant_scope(ctx.org_id):
        assert WorkItem.objects.count() == 1
    assert _tenant_now() == ""
    assert _visible() == 0


@pytest.mark.usefixtures("manual")
def test_transitions_under_manual_transactions_leave_no_tenant(ctx, worker_rctx) -> None:
    api.enqueue(ctx, "NOOP", {"n": 1})
    assert _tenant_now() == "" and _visible() == 0
    api.enqueue_many(ctx, [api.NewItem("NOOP", {"n": 2}), api.NewItem("NOOP", {"n": 3})])
    assert _tenant_now() == "" and _visible() == 0
    connections["default"].commit()  # the claim runs on the system login: let it see them
    claimed = claim(worker_rctx, "default", ["NOOP"], "w1", 30, 3)
    (c1, i1), (c2, i2), (c3, i3) = claimed
    complete(c1, i1)
    assert _tenant_now() == "" and _visible() == 0
    fail(c2, i2, "boom")
    assert _tenant_now() == "" and _visible() == 0
    release(c3, i3, "bye")
    assert _tenant_now() == "" and _visible() == 0


def test_an_enclosing_atomic_keeps_no_tenant_after_the_enqueue(ctx: OpContext) -> None:
    with transaction.atomic():
        api.enqueue(ctx, "NOOP", {})
        assert _tenant_now() == ""
        assert _visible() == 0
    assert WorkItem.objects.using("admin").count() == 1


def test_nested_scopes_restore_the_outer_tenant(ctx: OpContext, make_ctx) -> None:
    other = make_ctx()
    with tenant_scope(ctx.org_id):
        with tenant_scope(other.org_id):
            assert _tenant_now() == str(other.org_id)
            api.enqueue(ctx, "NOOP", {})  # another tenant's enqueue inside: its own scope
            assert _tenant_now() == str(other.org_id)
        assert _tenant_now() == str(ctx.org_id)
    assert _tenant_now() == ""


def test_a_scope_that_raises_restores_the_outer_tenant(ctx: OpContext, make_ctx) -> None:
    other = make_ctx()
    with tenant_scope(ctx.org_id):
        with pytest.raises(RuntimeError), tenant_scope(other.org_id):
            raise RuntimeError("inner failed")
        assert _tenant_now() == str(ctx.org_id)
    assert _tenant_now() == ""


def test_an_enqueue_inside_its_own_tenants_scope_joins_it(ctx: OpContext) -> None:
    with pytest.raises(RuntimeError), tenant_scope(ctx.org_id):
        api.enqueue(ctx, "NOOP", {})
        raise RuntimeError("the view failed")
    assert WorkItem.objects.using("admin").count() == 0


def _plan_mode() -> str:
    with connections["system"].cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        return cursor.fetchone()[0]


def test_the_claims_plan_setting_never_outlives_its_statement(ctx: OpContext, worker_rctx) -> None:
    """The claim runs on its generic plan (GENERIC_PLAN) only where its transaction is its own;
    in a caller's transaction on the system login, the setting would last to their commit."""
    before = _plan_mode()
    for _ in range(3):
        api.enqueue(ctx, "NOOP", {})
    assert len(claim(worker_rctx, "default", None, "w1", 30, 1)) == 1  # autocommit
    assert _plan_mode() == before
    with transaction.atomic(using="system"):
        assert len(claim(worker_rctx, "default", None, "w1", 30, 1)) == 1
        assert _plan_mode() == before
    system = connections["system"]
    system.set_autocommit(False)
    try:
        assert len(claim(worker_rctx, "default", None, "w1", 30, 1)) == 1
        assert _plan_mode() == before
    finally:
        system.rollback()
        system.set_autocommit(True)
