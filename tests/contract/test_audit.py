"""The audit trail is append-only for every login but the owner."""

from __future__ import annotations

import pytest
from django.db.utils import ProgrammingError

from audit.models import AuditEntry
from audit.services import append
from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tenancy.scope import system_scope, tenant_scope
from tests.factories import MembershipFactory

pytestmark = pytest.mark.usefixtures("committed")


@pytest.fixture
def ctx() -> OpContext:
    member = MembershipFactory()
    rctx = new_request_context(AppType.WEB)
    return OpContext(org_id=member.org_id, user_id=member.user_id, role=Role.MEMBER, rctx=rctx)


def test_append_signs_the_entry_with_the_context(ctx: OpContext) -> None:
    entry = append(ctx, "item.requeued", ("workqueue.workitem", "42"), {"why": "triage"})
    stored = AuditEntry.objects.using("admin").get(pk=entry.pk)
    assert (stored.org_id, stored.actor, stored.request_id) == (
        ctx.org_id,
        ctx.user_id,
        ctx.request_id,
    )
    assert (stored.subject_type, stored.subject_id, stored.data) == (
        "workqueue.workitem",
        "42",
        {"why": "triage"},
    )
    assert stored.created_at is not None


@pytest.mark.parametrize("scope", ["tenant", "system"])
def test_no_login_but_the_owner_can_rewrite_or_remove_an_entry(ctx: OpContext, scope: str) -> None:
    entry = append(ctx, "item.discarded", ("workqueue.workitem", "7"))

    def as_login():  # the everyday login in the tenant, or the system login
        return tenant_scope(ctx.org_id) if scope == "tenant" else system_scope()

    with pytest.raises(ProgrammingError, match="permission denied"):
        with as_login() as using:
            AuditEntry.objects.using(using).filter(pk=entry.pk).update(action="forged")
    with pytest.raises(ProgrammingError, match="permission denied"):
        with as_login() as using:
            AuditEntry.objects.using(using).filter(pk=entry.pk).delete()
    assert AuditEntry.objects.using("admin").get(pk=entry.pk).action == "item.discarded"
