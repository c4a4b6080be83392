"""``--tenant ORG_OR_SLUG`` on the ``manage.py queue`` subcommands that act on one tenant's
items (stats, cancel, requeue, discard; and ``limit``'s tenant target): the tenant as
``workqueue.api.tenant(...)`` names one, an org's slug or id; one the site does not have is one
line, with nothing read, changed or stored."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings

from audit.models import AuditEntry
from tenancy.contexts import OpContext
from tenancy.models import Org
from tenancy.modes import SINGLE_TENANT_ID
from tests.helpers import many_dead
from workqueue import api
from workqueue.models import RateLimit, Status, WorkItem


def _queue(*args: str) -> str:
    out = StringIO()
    call_command("queue", *args, stdout=out)
    return out.getvalue()


def _slug(ctx: OpContext) -> str:
    return Org.objects.using("admin").get(pk=ctx.org_id).slug


def _statuses(org_id: uuid.UUID) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in (
        WorkItem.objects.using("admin").filter(org_id=org_id).values_list("status", flat=True)
    ):
        counts[status] = counts.get(status, 0) + 1
    return counts


def test_a_tenant_named_by_its_slug_or_id(ctx: OpContext, make_ctx) -> None:  # type: ignore[no-untyped-def]
    other = make_ctx()
    for who in (ctx, other):
        for _ in range(3):
            api.enqueue(who, "NOOP", {})
    many_dead(ctx.org_id, 4)
    many_dead(other.org_id, 5)
    slug = _slug(ctx)

    mine = json.loads(_queue("stats", "--json", "--tenant", slug))
    assert mine["tenant"] == str(ctx.org_id)
    assert mine["by_status"] == {"pending": 3, "failed": 4}
    by_id = json.loads(_queue("stats", "--json", "--tenant", str(ctx.org_id)))
    assert (by_id["tenant"], by_id["by_status"]) == (mine["tenant"], mine["by_status"])

    out = _queue("cancel", "--kind", "NOOP", "--status", "pending", "--tenant", slug)
    assert "cancelled=3" in out and "finished" in out
    assert _statuses(ctx.org_id) == {"cancelled": 3, "failed": 4}
    assert _statuses(other.org_id) == {"pending": 3, "failed": 5}

    out = _queue("requeue", "--tenant", slug, "--json")
    assert json.loads(out.splitlines()[-1])["changed"] == 4
    assert _statuses(ctx.org_id) == {"cancelled": 3, "pending": 4}
    assert _statuses(other.org_id) == {"pending": 3, "failed": 5}
    requeued = AuditEntry.objects.using("admin").filter(action="work.requeued")
    assert set(requeued.values_list("org_id", flat=True)) == {ctx.org_id}

    _queue("limit", "set", "tenant", slug, "10/s")
    [limit] = RateLimit.objects.using("admin").all()
    assert (limit.scope, limit.target) == ("tenant", str(ctx.org_id))


# An id no org has (it reads as one, so it is looked up as an id, not a slug).
NO_ORG = "0b6f7c1e-3d2a-4e5f-8a9b-0c1d2e3f4a5b"


@pytest.mark.parametrize(
    ("args", "named", "says"),
    [
        (("stats",), "nobody", "--tenant: no org with the slug 'nobody'"),
        (("cancel", "--kind", "NOOP"), "nobody", "--tenant: no org with the slug 'nobody'"),
        (("requeue",), "nobody", "--tenant: no org with the slug 'nobody'"),
        (("discard",), "nobody", "--tenant: no org with the slug 'nobody'"),
        (("cancel", "--kind", "NOOP"), NO_ORG, f"--tenant: no org with the id '{NO_ORG}'"),
        (("discard",), NO_ORG, f"--tenant: no org with the id '{NO_ORG}'"),
    ],
)
def test_an_unknown_tenant_is_one_line_and_changes_nothing(
    ctx: OpContext, args, named, says
) -> None:  # type: ignore[no-untyped-def]
    api.enqueue(ctx, "NOOP", {})
    many_dead(ctx.org_id, 2)
    audited = AuditEntry.objects.using("admin").count()
    with pytest.raises(CommandError, match=says) as raised:
        _queue(*args, "--tenant", named)
    assert "\n" not in str(raised.value)
    assert _statuses(ctx.org_id) == {"pending": 1, "failed": 2}
    assert AuditEntry.objects.using("admin").count() == audited


def test_a_limit_on_an_unknown_tenant_is_refused_and_not_stored(committed: None) -> None:
    with pytest.raises(CommandError, match="target: no org with the slug 'nobody'"):
        _queue("limit", "set", "tenant", "nobody", "10/s")
    assert not RateLimit.objects.using("admin").exists()


def test_a_single_tenant_site_needs_no_tenant_and_refuses_another(committed: None) -> None:
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANCY": "single"}):
        api.enqueue(api.context(), "NOOP", {})
        assert json.loads(_queue("stats", "--json"))["by_status"] == {"pending": 1}
        site = json.loads(_queue("stats", "--json", "--tenant", str(SINGLE_TENANT_ID)))
        assert site["by_status"] == {"pending": 1}
        with pytest.raises(CommandError, match="--tenant: this site has one tenant"):
            _queue("cancel", "--kind", "NOOP", "--tenant", "acme")
        assert [row.status for row in WorkItem.objects.using("admin").all()] == [Status.PENDING]
