"""What a site's code enqueued: read, and asserted, in a test."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connections

from tenancy.scope import system_scope, tenant_scope
from workers.testing.tenants import org_id_of
from workqueue import runtime
from wqcore.conf import system_alias, tenant_alias

# The kind of every ``@task`` item (workers.django_tasks).
_TASK_KIND = "DJANGO_TASK"


def _refuse_unseen(what: str, alias: str) -> None:
    """Refuse to act on rows another connection cannot see: the test's own uncommitted ones."""
    if connections[tenant_alias()].in_atomic_block and alias != tenant_alias():
        raise RuntimeError(
            f"{what} reads on another connection ({alias!r}), which cannot see this test's "
            "uncommitted rows: name the tenant, or commit them (pytest-django: "
            "django_db(transaction=True); Django: TransactionTestCase)"
        )


def _task_path(task: Any) -> str:
    """The path a ``@task`` item names its task by (the function's module and name)."""
    func = getattr(task, "func", task)
    return f"{func.__module__}.{func.__qualname__}"


def _matches(item: runtime.WorkItem, payload: Mapping[str, Any] | None, task: Any) -> bool:
    body = item.payload if isinstance(item.payload, dict) else {}
    if payload is not None and any(
        key not in body or body[key] != value for key, value in payload.items()
    ):
        return False
    return task is None or body.get("path") == _task_path(task)


def enqueued(
    kind: str | None = None,
    *,
    lane: str | None = None,
    tenant: Any = None,
    payload: Mapping[str, Any] | None = None,
    task: Any = None,
    status: str | Sequence[str] = runtime.Status.PENDING,
) -> list[runtime.WorkItem]:
    """The items waiting (``status``: pending by default; a list, or ``"*"`` for any), oldest
    first, that are of ``kind``, in ``lane``, of ``tenant`` (a tenant, its key, a context),
    whose payload holds each key of ``payload`` with that value, or that run ``task`` (a
    ``@task``: its items' kind is DJANGO_TASK).

    Across tenants this reads on the system login, which in a site with three logins is
    another connection: inside a test's transaction, name the tenant."""
    if task is not None:
        kind = kind or _TASK_KIND
    filters: dict[str, Any] = {}
    if kind is not None:
        filters["kind"] = kind
    if lane is not None:
        filters["lane"] = lane
    if status != "*":
        filters["status__in"] = [status] if isinstance(status, str) else list(status)
    org_id = org_id_of(tenant)
    if org_id is not None:
        filters["org_id"] = org_id
        scope: contextlib.AbstractContextManager[str] = tenant_scope(org_id)
    else:
        _refuse_unseen("enqueued() without a tenant", system_alias())
        scope = system_scope()
    with scope as alias:
        found = list(
            runtime.WorkItem.objects.using(alias).filter(**filters).order_by("created_at", "id")
        )
    return [item for item in found if _matches(item, payload, task)]


def _described(items: Sequence[runtime.WorkItem]) -> str:
    if not items:
        return "nothing"
    shown = "\n".join(
        f"  {i.kind} lane={i.lane} tenant={i.org_id} status={i.status} payload={i.payload}"
        for i in items[:20]
    )
    more = f"\n  ... and {len(items) - 20} more" if len(items) > 20 else ""
    return shown + more


def _asked(kind: str | None, **given: Any) -> str:
    parts = [kind or "any kind"] + [f"{k}={v!r}" for k, v in given.items() if v is not None]
    return " ".join(parts)


def assert_enqueued(
    kind: str | None = None,
    *,
    lane: str | None = None,
    tenant: Any = None,
    payload: Mapping[str, Any] | None = None,
    task: Any = None,
    count: int | None = None,
) -> list[runtime.WorkItem]:
    """Fail the test unless an item waits that matches (``count``: exactly that many); return
    the matches. The failure lists what does wait."""
    found = enqueued(kind, lane=lane, tenant=tenant, payload=payload, task=task)
    if (count is None and found) or (count is not None and len(found) == count):
        return found
    waiting = enqueued(tenant=tenant) if tenant is not None else enqueued()
    wanted = _asked(kind, lane=lane, tenant=org_id_of(tenant), payload=payload, task=task)
    how_many = "one or more" if count is None else str(count)
    raise AssertionError(
        f"expected {how_many} enqueued: {wanted}; found {len(found)}. Waiting:\n"
        f"{_described(waiting)}"
    )


def refute_enqueued(
    kind: str | None = None,
    *,
    lane: str | None = None,
    tenant: Any = None,
    payload: Mapping[str, Any] | None = None,
    task: Any = None,
) -> None:
    """Fail the test if an item waits that matches; the failure lists those."""
    found = enqueued(kind, lane=lane, tenant=tenant, payload=payload, task=task)
    if found:
        wanted = _asked(kind, lane=lane, tenant=org_id_of(tenant), payload=payload, task=task)
        raise AssertionError(f"expected nothing enqueued: {wanted}; found:\n{_described(found)}")
