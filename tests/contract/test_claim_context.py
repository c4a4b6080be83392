"""claim_context: the context claimed work runs under."""

from __future__ import annotations

import uuid

import pytest
from django.db.models.functions import Now

from tenancy.contexts import SYSTEM_ACTOR, AppType, Role, new_request_context
from tenancy.exceptions import NotFound
from tenancy.membership import service_contexts
from tenancy.models import Membership
from tenancy.services import claim_context
from tests.factories import MembershipFactory, OrgFactory

pytestmark = pytest.mark.usefixtures("committed")

RCTX = new_request_context(AppType.WORKER)
CAUSE = uuid.uuid4()


def test_a_member_gets_their_own_context() -> None:
    member = MembershipFactory(role=Role.ADMIN)
    ctx = claim_context(RCTX, member.org_id, member.user_id, CAUSE)
    # The author as the actor text every column holds: the user's key, whatever its type.
    assert (ctx.org_id, ctx.user_id, ctx.role) == (
        member.org_id,
        str(member.user_id),
        Role.ADMIN,
    )
    assert ctx.caused_by_request_id == CAUSE
    assert ctx.rctx is RCTX


def test_a_departed_member_gets_the_tenants_service_context() -> None:
    member = MembershipFactory()
    Membership.objects.using("admin").filter(pk=member.pk).update(ended_at=Now())
    ctx = claim_context(RCTX, member.org_id, member.user_id, CAUSE)
    assert (ctx.org_id, ctx.user_id, ctx.role) == (
        member.org_id,
        SYSTEM_ACTOR,
        Role.SERVICE,
    )
    assert ctx.caused_by_request_id == CAUSE


def test_the_system_user_gets_the_tenants_service_context() -> None:
    org = OrgFactory()
    ctx = claim_context(RCTX, org.pk, SYSTEM_ACTOR, None)
    assert (ctx.org_id, ctx.user_id, ctx.role) == (org.pk, SYSTEM_ACTOR, Role.SERVICE)


def test_a_gone_tenant_is_not_found() -> None:
    member = MembershipFactory()
    member.org.mark_gone()
    with pytest.raises(NotFound):
        claim_context(RCTX, member.org_id, member.user_id, CAUSE)
    with pytest.raises(NotFound):
        claim_context(RCTX, uuid.uuid4(), SYSTEM_ACTOR, CAUSE)


def test_service_contexts_cover_each_live_tenant() -> None:
    live, gone = OrgFactory(), OrgFactory()
    gone.mark_gone()
    contexts = service_contexts(RCTX)
    assert [c.org_id for c in contexts] == [live.pk]
    assert contexts[0].role == Role.SERVICE and contexts[0].user_id == SYSTEM_ACTOR
