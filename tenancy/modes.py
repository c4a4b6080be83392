"""Who the tenants are: the three tenancies a site chooses from (``WORKQUEUE["TENANCY"]``).

- ``single`` (the default): one implicit tenant (``SINGLE_TENANT_ID``). A site with no tenants
  of its own needs nothing; every queue guarantee holds, and row-level security has one tenant
  to fence.
- ``orgs``: the tenancy app's orgs and memberships (add ``tenancy`` to ``INSTALLED_APPS``). A
  request's tenant is the member's org; an org can be marked gone (its work is not run); work
  runs as its author while they are still a member. With its three logins this is the strongest
  fence (docs/howto/tenancy.md).
- a dotted path: the site's own tenants. It names a callable ``tenant_for(request)`` giving the
  request's tenant (a model instance, a primary key, or None for none); the queue keeps each
  tenant's rows under the id ``tenant_id(tenant)`` gives (the tenant's UUID primary key as it
  is, any other key mapped to a UUID of its own), fenced by row-level security like the others.

Each tenancy turns a request into its context (``request_context``), says which tenants are
live, and gives the claim the SQL that finds what each claimed row's context needs, so the
claim stays one round trip whichever tenancy it is.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.utils.module_loading import import_string

from tenancy.contexts import (
    OpContext,
    RequestContext,
    Role,
    actor_of,
    contexts_from_rows,
    service_context,
)
from wqcore.conf import wq_settings

SQL_DIR = Path(__file__).with_name("sql")
# The one tenant of a single-tenant site (any fixed UUID would do; this one is ours alone).
SINGLE_TENANT_ID = uuid.UUID("5e9b4c1e-0000-4000-8000-00000000a11e")
# Where a site's own tenant keys become the queue's tenant ids (uuid5 of the key's text).
TENANT_NAMESPACE = uuid.UUID("8c2f6a4e-6d1b-5f3a-9c7e-1b2a3c4d5e6f")


def _user_role(user: Any) -> Role:
    """A signed-in user's role in the one tenant a site names for them: its staff administer
    it (the admin's tenant staff), everyone else is a member."""
    return Role.ADMIN if getattr(user, "is_staff", False) else Role.MEMBER


class _Named:
    """A tenancy where the site names each request's tenant (one implicit, or its own)."""

    name = ""
    claim_part = "claim_contexts_open"

    def tenant_of(self, request: HttpRequest) -> uuid.UUID | None:
        raise NotImplementedError

    def request_context(self, request: HttpRequest, rctx: RequestContext) -> OpContext | None:
        """The signed-in user's context in the request's tenant (its staff as admins);
        anonymous requests act as the tenant's service context; None: no tenant."""
        org_id = self.tenant_of(request)
        if org_id is None:
            return None
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return service_context(rctx, org_id)
        return OpContext(org_id=org_id, user_id=actor_of(user), role=_user_role(user), rctx=rctx)

    def contexts(
        self, rctx: RequestContext, pairs: Iterable[tuple[uuid.UUID, str]]
    ) -> dict[tuple[uuid.UUID, str], OpContext | None]:
        """Every tenant is live; an author keeps the member role."""
        return contexts_from_rows(
            rctx, [(org_id, actor, True, Role.MEMBER.value) for org_id, actor in pairs]
        )

    def tenant_names(self, org_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        return {}


class SingleTenancy(_Named):
    name = "single"

    def tenant_of(self, request: HttpRequest) -> uuid.UUID | None:
        return SINGLE_TENANT_ID

    def tenant_names(self, org_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        return {SINGLE_TENANT_ID: "the site"} if SINGLE_TENANT_ID in set(org_ids) else {}


def tenant_id(tenant: Any) -> uuid.UUID:
    """The queue's id of a site's own tenant: its UUID primary key as it is; any other key
    (an integer, a slug) as a UUID of its own (uuid5 of the key's text, the same in every
    process)."""
    key = getattr(tenant, "pk", tenant)
    if isinstance(key, uuid.UUID):
        return key
    if key is None:
        raise ValueError("a tenant with no primary key (not saved yet) has no queue id")
    return uuid.uuid5(TENANT_NAMESPACE, str(key))


class SiteTenancy(_Named):
    """The site's own tenants, named by its callable."""

    def __init__(self, path: str, tenant_for: Callable[[HttpRequest], Any]) -> None:
        self.name = path
        self._tenant_for = tenant_for

    def tenant_of(self, request: HttpRequest) -> uuid.UUID | None:
        tenant = self._tenant_for(request)
        return None if tenant is None else tenant_id(tenant)


class OrgsTenancy:
    """The tenancy app's orgs and memberships."""

    name = "orgs"
    claim_part = "claim_contexts_orgs"

    def request_context(self, request: HttpRequest, rctx: RequestContext) -> OpContext | None:
        from tenancy.membership import member_context

        return member_context(request, rctx)

    def contexts(
        self, rctx: RequestContext, pairs: Iterable[tuple[uuid.UUID, str]]
    ) -> dict[tuple[uuid.UUID, str], OpContext | None]:
        from tenancy.membership import lookup_contexts

        return lookup_contexts(rctx, pairs)

    def tenant_names(self, org_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        from tenancy.models import Org
        from wqcore.conf import system_alias

        ids = list(org_ids)
        found = Org.objects.using(system_alias()).filter(pk__in=ids).values_list("id", "name")
        return dict(found)


Tenancy = SingleTenancy | SiteTenancy | OrgsTenancy


@cache
def _tenancy(setting: str) -> Tenancy:
    if setting == "single":
        return SingleTenancy()
    if setting == "orgs":
        from django.apps import apps

        if not apps.is_installed("tenancy"):
            raise ImproperlyConfigured(
                "WORKQUEUE['TENANCY'] is 'orgs', but the tenancy app is not installed: add "
                "'tenancy' to INSTALLED_APPS, or choose 'single' or your own tenant callable"
            )
        return OrgsTenancy()
    try:
        tenant_for = import_string(setting)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"WORKQUEUE['TENANCY'] = {setting!r}: 'single', 'orgs', or the dotted path of a "
            f"callable tenant_for(request) (it does not import: {exc})"
        ) from None
    if not callable(tenant_for):
        raise ImproperlyConfigured(
            f"WORKQUEUE['TENANCY'] = {setting!r} names something that is not callable: name a "
            "function tenant_for(request) that returns the request's tenant (or None)"
        )
    return SiteTenancy(setting, tenant_for)


def current_tenancy() -> Tenancy:
    """The site's tenancy (``WORKQUEUE["TENANCY"]``)."""
    return _tenancy(wq_settings.TENANCY)


def has_tenants() -> bool:
    """Whether the site has tenants to tell apart (any tenancy but ``single``): where it has
    one, pages and lists name none."""
    return wq_settings.TENANCY != "single"


def claim_contexts_sql() -> str:
    """The part of the claim that finds what each claimed row's context needs (the site's
    tenancy's ``sql/<part>.sql``)."""
    from wqcore.statements import load_sql

    return load_sql(current_tenancy().claim_part, SQL_DIR)
