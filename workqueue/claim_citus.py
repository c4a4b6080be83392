"""The claim's Citus statements (``WORKQUEUE["CITUS"]``): tenants chosen on the coordinator
without a lock, then a claim within one tenant that Citus routes to the node holding it.

The single server's claims pick across tenants with ``FOR UPDATE SKIP LOCKED``, which Citus
refuses on a distributed table; these are used only when the site says it is on Citus
(``claim.claim`` reads the setting), so the single server's statements are untouched.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from tenancy.modes import claim_contexts_sql
from workqueue import SQL_DIR
from wqcore.statements import Statement


class DueTenantsParams(NamedTuple):
    lane: str
    kinds: list[str]
    limit: int


class ClaimTenantParams(NamedTuple):
    org_id: uuid.UUID
    lane: str
    kinds: list[str]
    worker_id: str
    lease_s: float
    limit: int
    # One random value per call: each item's claim token is made from it and the item's id.
    seed: str
    # The cap of a tenant without a share of its own (WORKQUEUE["MAX_IN_FLIGHT"]; None: none).
    default_cap: int | None


DUE_TENANTS_CITUS = Statement("due_tenants_citus", DueTenantsParams, SQL_DIR)
CLAIM_TENANT_CITUS = Statement(
    "claim_tenant_citus",
    ClaimTenantParams,
    SQL_DIR,
    build_parts=lambda: {"claim_contexts": claim_contexts_sql()},
)
