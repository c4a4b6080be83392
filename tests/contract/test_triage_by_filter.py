"""Triage by filter: everything a dead-letter filter matches, requeued or discarded server-side
in bounded batches, fenced on the moment the operator confirmed, audited per item; the grouped
reading and the error search it shares its filter with."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connections

from audit.models import AuditEntry
from tenancy.contexts import OpContext, Role
from tests.factories import UserFactory
from tests.helpers import many_dead, row
from tests.helpers import queue_settings as settings_of
from workqueue import api
from workqueue.models import Status, WorkItem
from workqueue.triage import (
    DeadFilter,
    Drawn,
    Progress,
    act_on_every_match,
    act_on_matching,
    count_dead,
    group_dead,
    read_lanes,
    requeue_dead,
)

BAD_DEPLOY = "PermanentError: shipment not found"


def _db_now():  # type: ignore[no-untyped-def]
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def _statuses(ids) -> dict[str, int]:  # type: ignore[no-untyped-def]
    counts: dict[str, int] = {}
    for status in (
        WorkItem.objects.using("admin").filter(pk__in=ids).values_list("status", flat=True)
    ):
        counts[status] = counts.get(status, 0) + 1
    return counts


@pytest.fixture
def operator(ctx: OpContext) -> OpContext:
    return OpContext(ctx.org_id, UserFactory().pk, Role.ADMIN, ctx.rctx)


def test_five_thousand_dead_letters_are_one_group_and_one_requeue(
    ctx: OpContext, operator: OpContext
) -> None:
    ids = many_dead(ctx.org_id, 5000, error=BAD_DEPLOY)
    others = many_dead(ctx.org_id, 3, error="RetryableError: gateway timeout")
    grouped = group_dead(DeadFilter())
    assert [(g.kind, g.error, g.items) for g in grouped.groups] == [
        ("NOOP", BAD_DEPLOY, 5000),
        ("NOOP", "RetryableError: gateway timeout", 3),
    ]
    assert grouped.groups[0].first_failed < grouped.groups[0].last_failed
    assert (grouped.scanned, grouped.capped) == (5003, False)

    dead = DeadFilter(kind="NOOP", error_contains="shipment NOT found")
    counted = count_dead(dead)
    assert counted.by_tenant == {ctx.org_id: 5000}
    progress = act_on_matching("requeue", operator, dead, counted.read_at)
    assert progress == Progress(changed=5000, left_alone=0, done=True)
    assert _statuses(ids) == {"pending": 5000}
    assert _statuses(others) == {"failed": 3}
    entries = AuditEntry.objects.using("admin").filter(action="work.requeued")
    assert entries.count() == 5000
    entry = entries.filter(subject_id=str(ids[0])).get()
    assert entry.actor == str(operator.user_id)
    assert entry.data["error"].startswith(BAD_DEPLOY)
    assert entry.data["filter"]["error_contains"] == "shipment NOT found"
    assert row(ids[0]).attempts == 0


def test_items_changed_after_the_moment_confirmed_are_left_alone(
    ctx: OpContext, operator: OpContext
) -> None:
    ids = many_dead(ctx.org_id, 600, error=BAD_DEPLOY)
    confirmed = _db_now()
    # Meanwhile: one is requeued by someone else, one fails again (same error, later).
    requeue_dead(operator, [Drawn.of(row(ids[0]))])
    with connections["admin"].cursor() as cursor:
        cursor.execute("UPDATE workqueue_workitem SET updated_at = now() WHERE id = %s", [ids[1]])
    progress = act_on_matching("discard", operator, DeadFilter(), confirmed)
    assert (progress.changed, progress.done) == (598, True)
    assert row(ids[0]).status == Status.PENDING
    assert row(ids[1]).status == Status.FAILED
    assert _statuses(ids[2:]) == {"discarded": 598}
    discarded = AuditEntry.objects.using("admin").filter(action="work.discarded")
    assert discarded.count() == 598
    assert discarded.first().data["payload"]["n"] >= 1


def test_bounded_batches_resume_where_they_stopped(ctx: OpContext, operator: OpContext) -> None:
    ids = many_dead(ctx.org_id, 250, error=BAD_DEPLOY)
    confirmed = _db_now()
    first = act_on_matching("requeue", operator, DeadFilter(), confirmed, 100, 2)
    assert (first.changed, first.done) == (200, False)
    again = act_on_matching("requeue", operator, DeadFilter(), confirmed, 100, 2)
    assert (again.changed, again.done) == (50, True)
    assert _statuses(ids) == {"pending": 250}
    # Once more: nothing left, nothing changed twice.
    assert act_on_matching("requeue", operator, DeadFilter(), confirmed).changed == 0
    assert AuditEntry.objects.using("admin").filter(action="work.requeued").count() == 250


def test_a_tenants_action_never_reaches_another_tenants_items(ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    other = make_ctx()
    theirs = many_dead(other.org_id, 20, error=BAD_DEPLOY)
    mine = many_dead(ctx.org_id, 10, error=BAD_DEPLOY)
    now = _db_now()
    # Even a filter naming the other tenant finds nothing under this tenant's row-level security.
    named = DeadFilter(org_id=other.org_id)
    assert act_on_matching("requeue", ctx, named, now).changed == 0
    assert count_dead(DeadFilter(), scope=ctx.org_id).by_tenant == {ctx.org_id: 10}
    assert act_on_matching("requeue", ctx, DeadFilter(), now).changed == 10
    assert _statuses(theirs) == {"failed": 20} and _statuses(mine) == {"pending": 10}


def test_across_tenants_each_tenant_is_audited_in_its_own_tenant(ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    other = make_ctx()
    many_dead(other.org_id, 30, error=BAD_DEPLOY)
    many_dead(ctx.org_id, 40, error=BAD_DEPLOY)
    user = UserFactory().pk
    now = _db_now()
    swept = act_on_every_match(
        "requeue", DeadFilter(), now, lambda org: OpContext(org, user, Role.ADMIN, ctx.rctx)
    )
    assert (swept.changed, swept.tenants, swept.done) == (70, 2, True)
    entries = AuditEntry.objects.using("admin").filter(action="work.requeued", actor=str(user))
    assert {(e.org_id, n) for e, n in [(e, 0) for e in entries[:1]]}  # entries exist
    assert entries.filter(org_id=other.org_id).count() == 30
    assert entries.filter(org_id=ctx.org_id).count() == 40


def test_error_search_and_time_filter(ctx: OpContext) -> None:
    recent = many_dead(ctx.org_id, 5, error="ValueError: 100% bad_input", failed_s_ago=60)
    older = many_dead(ctx.org_id, 4, error="ValueError: 100% bad_input", failed_s_ago=3 * 86400)
    many_dead(ctx.org_id, 6, error="KeyError: 'x'", failed_s_ago=60)
    hour_ago = _db_now() - timedelta(hours=1)
    # Wildcards in the text are taken literally ("100%", "bad_input").
    assert count_dead(DeadFilter(error_contains="100% bad_")).items == 9
    assert count_dead(DeadFilter(error_contains="100%% bad")).items == 0
    assert count_dead(DeadFilter(error_contains="1_0")).items == 0
    assert count_dead(DeadFilter(failed_since=hour_ago)).items == 11
    searched = DeadFilter(error_contains="bad_input", failed_since=hour_ago)
    assert count_dead(searched).items == len(recent)
    # A search without a "since" looks at the search window only.
    with settings_of(TRIAGE_SEARCH_WINDOW_S=86400):
        assert count_dead(DeadFilter(error_contains="bad_input")).items == 5
    assert len(older) == 4
    assert read_lanes() == ["default"]


@pytest.mark.parametrize(
    ("dead", "says"),
    [
        (DeadFilter(kind=""), "kind: must be non-empty text"),
        (DeadFilter(error_contains="x" * 201), "error_contains: at most 200 characters"),
        (DeadFilter(error_contains="a\x00b"), "error_contains: must be non-empty text"),
        (DeadFilter(lane="l" * 51), "lane: at most 50 characters"),
    ],
)
def test_a_bad_filter_is_refused_by_name(ctx: OpContext, dead, says: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(api.InvalidPayload, match=says):
        count_dead(dead)
