"""The contexts a site's test acts with: a tenant and a user, outside any request."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from tenancy.contexts import AppType, OpContext, Role, actor_of, new_request_context
from tenancy.current import using_context
from tenancy.modes import SINGLE_TENANT_ID, current_tenancy, tenant_id
from tenancy.scope import tenant_scope


def context(tenant: Any = None, user: Any = None, role: Role | None = None) -> OpContext:
    """An ``OpContext`` to enqueue with outside a request: ``tenant`` (its model instance, its
    key, or the queue's UUID; None in a single-tenant site) and ``user`` (a user or its key;
    None: the system). A member's role unless ``role`` says otherwise."""
    if tenant is None:
        if current_tenancy().name != "single":
            raise ValueError(
                "tenant: this site has tenants (WORKQUEUE['TENANCY'] is "
                f"{current_tenancy().name!r}); name the one to act for"
            )
        org_id = SINGLE_TENANT_ID
    else:
        org_id = tenant_id(tenant)
    if role is None:
        role = Role.SERVICE if user is None else Role.MEMBER
    rctx = new_request_context(AppType.CLI)
    return OpContext(org_id=org_id, user_id=actor_of(user), role=role, rctx=rctx)


@contextlib.contextmanager
def tenant(tenant: Any = None, user: Any = None) -> Iterator[OpContext]:
    """Act for ``tenant`` in the block: its context is the current one (``@task.enqueue()``
    reads it, as a view's does), and the everyday connection's transaction names the tenant,
    so the queue's tables read through row-level security show its rows. Yields the context."""
    ctx = context(tenant, user)
    with using_context(ctx), tenant_scope(ctx.org_id):
        yield ctx


def org_id_of(tenant: Any) -> uuid.UUID | None:
    """The queue's id of ``tenant`` (a tenant, its key, a context), or None for none."""
    if tenant is None:
        return None
    if isinstance(tenant, OpContext):
        return tenant.org_id
    return tenant_id(tenant)
