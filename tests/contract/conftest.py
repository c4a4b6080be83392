"""Helpers for the contract tests: tenants, contexts, and back-dated rows."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import pytest
from django.db import connections

from tenancy.contexts import AppType, OpContext, RequestContext, new_request_context
from tenancy.models import Org, Role
from tests.factories import MembershipFactory, OrgFactory
from workqueue.models import WorkItem


@pytest.fixture
def worker_rctx() -> RequestContext:
    return new_request_context(AppType.WORKER)


@pytest.fixture
def make_ctx() -> Callable[..., OpContext]:
    """A member's context in a new (or the given) org."""

    def make(org: Org | None = None) -> OpContext:
        member = MembershipFactory(org=org or OrgFactory(), role=Role.MEMBER)
        rctx = new_request_context(AppType.WEB, traceparent=None)
        return OpContext(org_id=member.org_id, user_id=member.user_id, role=member.role, rctx=rctx)

    return make


@pytest.fixture
def ctx(committed: None, make_ctx: Callable[..., OpContext]) -> OpContext:
    return make_ctx()


def row(item_id: uuid.UUID) -> WorkItem:
    """The item as stored, read as the owner (no tenant, no fence)."""
    return WorkItem.objects.using("admin").get(pk=item_id)


def back_date(item_id: uuid.UUID, **seconds_ago: float) -> None:
    """Move the item's timestamps into the past, e.g. ``lease_expires_at=90``: the database's
    clock decides every transition, so tests make rows old rather than freezing a clock."""
    sets = ", ".join(f"{column} = now() - make_interval(secs => %s)" for column in seconds_ago)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            f"UPDATE workqueue_workitem SET {sets} WHERE id = %s", [*seconds_ago.values(), item_id]
        )


@contextmanager
def statements(*aliases: str) -> Iterator[list[str]]:
    """Collect every statement sent on ``aliases`` (one entry per round trip)."""
    seen: list[str] = []

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        seen.append(sql)
        return execute(sql, params, many, context)

    with ExitStack() as stack:
        for alias in aliases:
            stack.enter_context(connections[alias].execute_wrapper(wrapper))
        yield seen
