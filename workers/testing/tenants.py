"""The contexts a site's test acts with: a tenant and a user, outside any request (the same
``context``/``tenant`` as ``workqueue.api``'s)."""

from __future__ import annotations

import uuid
from typing import Any

from tenancy.contexts import OpContext
from tenancy.modes import tenant_id
from tenancy.naming import context, tenant

__all__ = ["context", "org_id_of", "tenant"]


def org_id_of(tenant: Any) -> uuid.UUID | None:
    """The queue's id of ``tenant`` (a tenant, its key, a context), or None for none."""
    if tenant is None:
        return None
    if isinstance(tenant, OpContext):
        return tenant.org_id
    return tenant_id(tenant)
