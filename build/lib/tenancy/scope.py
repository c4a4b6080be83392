"""The tenant scopes, as callers use them: ``tenant_scope(org_id)`` (one transaction whose rows
are that tenant's, by row-level security), ``deferred_tenant_scope(org_id)`` (the same, begun
by its first statement) and ``system_scope()`` (the named tenant-less operations, every tenant).

How a transaction names its tenant is the statement engine's (``wqcore.scope``), since every
statement it runs names one; who the tenant is, is tenancy's (``tenancy.contexts``,
``tenancy.resolve``).
"""

from wqcore.scope import (
    current_tenant,
    deferred_tenant_scope,
    may_name_tenant_itself,
    system_scope,
    tenant_scope,
)

__all__ = [
    "current_tenant",
    "deferred_tenant_scope",
    "may_name_tenant_itself",
    "system_scope",
    "tenant_scope",
]
