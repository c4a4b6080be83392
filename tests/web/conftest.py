"""Web tests: the admin, the API and the pages, through Django's test client, on real PostgreSQL
with the product's three logins (rows committed: the client's requests run on other logins)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tenancy.models import Org
from tests.factories import MembershipFactory, OrgFactory, UserFactory

User = get_user_model()


@dataclass
class Person:
    user: User
    client: Client
    # The member's context in their org (None for an operator who belongs to none).
    ctx: OpContext | None = None

    @property
    def org_id(self):  # type: ignore[no-untyped-def]
        assert self.ctx is not None
        return self.ctx.org_id


def signed_in(user: User, **client_kwargs: object) -> Client:
    client = Client(**client_kwargs)  # type: ignore[arg-type]
    client.force_login(user)
    return client


@pytest.fixture
def member(committed: None) -> Callable[..., Person]:
    """A member of ``org`` (a new org by default) with ``role``; staff unless told otherwise."""

    def make(org: Org | None = None, role: Role = Role.ADMIN, staff: bool = True) -> Person:
        user = UserFactory(is_staff=staff)
        membership = MembershipFactory(org=org or OrgFactory(), user=user, role=role)
        ctx = OpContext(
            org_id=membership.org_id,
            user_id=user.pk,
            role=Role(role),
            rctx=new_request_context(AppType.WEB),
        )
        return Person(user, signed_in(user), ctx)

    return make


@pytest.fixture
def operator(committed: None) -> Person:
    """The site's operator: a superuser who belongs to no tenant."""
    user = UserFactory(is_staff=True, is_superuser=True)
    return Person(user, signed_in(user))
