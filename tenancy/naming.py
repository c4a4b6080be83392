"""Naming a tenant outside a request (a management command, a cron job, a signal, a shell).

``workqueue.api.tenant(org_or_slug)`` names one for a block; ``workqueue.api.context(...)``
makes the ``OpContext`` the ``(ctx, ...)`` calls take; a management command's ``--tenant``
takes the same names as text (``org_id_named``). A single-tenant site names nothing: its one
tenant is the default everywhere (``require_context``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from tenancy.contexts import AppType, OpContext, Role, actor_of, new_request_context
from tenancy.current import current_context, using_context
from tenancy.exceptions import NoContext
from tenancy.modes import SINGLE_TENANT_ID, current_tenancy, tenant_id
from tenancy.scope import tenant_scope

HOW_TO_NAME = (
    "outside a request, name the tenant with `with workqueue.api.tenant(org_or_slug) as ctx:` "
    "(a single-tenant site names nothing)"
)


def org_id_for(tenant: Any) -> uuid.UUID:
    """The queue's id of ``tenant``: a context's tenant, a model instance, its key, the queue's
    UUID, or (in the ``orgs`` tenancy) an org's slug. None: the site's one tenant, in a
    single-tenant site."""
    if isinstance(tenant, OpContext):
        return tenant.org_id
    tenancy = current_tenancy()
    if tenant is None:
        if tenancy.name != "single":
            raise ValueError(
                f"tenant: this site has tenants (WORKQUEUE['TENANCY'] is {tenancy.name!r}); "
                "name the one to act for (an org, its slug or its id)"
            )
        return SINGLE_TENANT_ID
    if tenancy.name == "orgs" and isinstance(tenant, str):
        return _org_by_slug_or_id(tenant)
    return tenant_id(tenant)


def _org_by_slug_or_id(text: str) -> uuid.UUID:
    from tenancy.models import Org
    from wqcore.conf import system_alias

    try:
        as_id: uuid.UUID | None = uuid.UUID(text)
    except ValueError:
        as_id = None
    orgs = Org.objects.using(system_alias())
    found = orgs.filter(pk=as_id) if as_id else orgs.filter(slug=text)
    org_id = next(iter(found.values_list("id", flat=True)), None)
    if org_id is None:
        raise ValueError(f"tenant: no org with the {'id' if as_id else 'slug'} {text!r}")
    return org_id


def org_id_named(text: str) -> uuid.UUID:
    """The queue's id of the tenant a command line names as text (``--tenant``), refused with a
    ``ValueError`` saying what to pass when the site has no such tenant: in the ``orgs``
    tenancy an org's slug or id (the org must exist); in a single-tenant site nothing but its
    one tenant's id; with the site's own tenants their key (one that reads as a UUID is taken
    as the queue's id), which the queue cannot check (it knows only the site's callable)."""
    tenancy = current_tenancy()
    if tenancy.name == "single":
        if text.strip() != str(SINGLE_TENANT_ID):
            raise ValueError(
                f"tenant: this site has one tenant (WORKQUEUE['TENANCY'] is 'single'), so there "
                f"is none to name: leave the tenant out (got {text!r})"
            )
        return SINGLE_TENANT_ID
    if tenancy.name == "orgs":
        return _org_by_slug_or_id(text.strip())
    try:
        return uuid.UUID(text)
    except ValueError:
        return tenant_id(text.strip())


def context(tenant: Any = None, user: Any = None, role: Role | None = None) -> OpContext:
    """An ``OpContext`` to pass to the queue's ``(ctx, ...)`` calls outside a request:
    ``tenant`` as ``org_id_for`` takes it, ``user`` (a user or its key; None: the system). A
    member's role unless ``role`` says otherwise (the service role for the system)."""
    org_id = org_id_for(tenant)
    if role is None:
        role = Role.SERVICE if user is None else Role.MEMBER
    rctx = new_request_context(AppType.CLI)
    return OpContext(org_id=org_id, user_id=actor_of(user), role=role, rctx=rctx)


@contextlib.contextmanager
def tenant(tenant: Any = None, user: Any = None) -> Iterator[OpContext]:
    """Act for ``tenant`` in the block: its context is the current one (``@task.enqueue()``
    and ``get_result`` read it, as in a view), and the everyday connection's transaction names
    the tenant, so the queue's tables read through row-level security show its rows. Yields
    the context."""
    ctx = context(tenant, user)
    with using_context(ctx), tenant_scope(ctx.org_id):
        yield ctx


def require_context(what: str) -> OpContext:
    """The context named for what runs now (in a single-tenant site with none named, its one
    tenant's), or ``NoContext`` naming ``what`` needed it and how to name one."""
    ctx = current_context()
    if ctx is not None:
        return ctx
    if current_tenancy().name == "single":
        return context()
    raise NoContext(
        f"{what} needs a tenant and none is named here: call it in a view of a signed-in "
        f"member (the tenancy middleware names theirs), or {HOW_TO_NAME}"
    )
