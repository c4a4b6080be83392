"""The sweep's steps against back-dated rows: each does its job, bounded, leaving newer rows."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connections

from audit.models import AuditEntry
from outbox.emit import emit
from outbox.models import OutboxRow
from tenancy.contexts import SYSTEM_ACTOR, OpContext
from tests.helpers import back_date, back_date_outbox, queue_settings, row
from workers.gauges import GAUGES, read_queue_gauges
from workers.sweep import purge_items, purge_outbox, purge_sessions, relay_outbox, requeue_stale
from workers.sweep.config import SweepSettings
from workers.sweep.sweeper import MUTEX, sweep_once
from workqueue import api, runtime
from workqueue.claim import claim
from workqueue.idempotency import claim_key, fingerprint, store_response
from workqueue.models import Status, WorkItem
from wqcore.logs import event_name, event_text

pytestmark = pytest.mark.usefixtures("committed")

# The sessions are the site's: the reference site asks the sweep to purge them, these tests not.
SETTINGS = SweepSettings(batch=2, max_batches=2, purge_sessions=False)


def _claimed(ctx: OpContext, rctx, n: int, **payload) -> list[WorkItem]:  # type: ignore[no-untyped-def]
    for _ in range(n):
        api.enqueue(ctx, "NOOP", dict(payload))
    return [item for _, item in claim(rctx, "default", ["NOOP"], "dead-worker", 30, n)]


def test_requeue_stale_hands_back_expired_claims_and_dead_letters_spent_ones(
    ctx, make_ctx, worker_rctx
) -> None:
    other = make_ctx()
    mine = _claimed(ctx, worker_rctx, 3)
    theirs = _claimed(other, worker_rctx, 1)
    fresh = _claimed(ctx, worker_rctx, 1)
    for item in [*mine, *theirs]:
        back_date(item.id, lease_expires_at=90)
    WorkItem.objects.using("admin").filter(pk=mine[0].id).update(attempts=3)  # spent (max 3)
    result = requeue_stale.run_once(worker_rctx, SweepSettings(batch=10))
    assert (result.requeued, result.dead_lettered) == (3, 1)
    assert row(mine[0].id).status == Status.FAILED
    assert row(mine[0].id).last_error == "lease expired; attempts spent"
    assert {row(i.id).status for i in [*mine[1:], *theirs]} == {Status.PENDING}
    assert row(fresh[0].id).status == Status.CLAIMED
    [entry] = AuditEntry.objects.using("admin").filter(action="work.dead_lettered")
    assert entry.subject_id == str(mine[0].id) and entry.org_id == ctx.org_id
    assert entry.actor == SYSTEM_ACTOR


def test_requeue_stale_is_bounded_by_batch_and_max_batches(ctx, worker_rctx) -> None:
    items = _claimed(ctx, worker_rctx, 6)
    for item in items:
        back_date(item.id, lease_expires_at=90)
    assert requeue_stale.run_once(worker_rctx, SETTINGS).requeued == 4  # 2 batches of 2
    assert requeue_stale.run_once(worker_rctx, SETTINGS).requeued == 2


def test_relay_step_relays_what_was_written_while_no_relayer_ran(ctx, worker_rctx) -> None:
    for i in range(3):
        emit(ctx, "work.NOOP", {"n": i})
    assert relay_outbox.run_once(worker_rctx, SETTINGS).enqueued == 3
    assert WorkItem.objects.using("admin").count() == 3


def test_purges_leave_newer_rows_and_keep_dead_letters_longer(ctx, worker_rctx) -> None:
    settings = SweepSettings(
        batch=10, item_retention_s=3600, dead_letter_retention_s=7200, outbox_retention_s=60
    )
    done_old, done_new, failed_mid, failed_old = _claimed(ctx, worker_rctx, 4)
    for item in (done_old, done_new):
        WorkItem.objects.using("admin").filter(pk=item.id).update(status=Status.DONE)
    for item in (failed_mid, failed_old):
        WorkItem.objects.using("admin").filter(pk=item.id).update(status=Status.FAILED)
    back_date(done_old.id, updated_at=4000)
    back_date(failed_mid.id, updated_at=4000)  # past the item retention, not the dead letters'
    back_date(failed_old.id, updated_at=8000)
    assert purge_items.run_once(worker_rctx, settings) == (1, 1)
    assert set(WorkItem.objects.using("admin").values_list("id", flat=True)) == {
        done_new.id,
        failed_mid.id,
    }
    kept = emit(ctx, "work.NOOP", {})
    gone = emit(ctx, "work.NOOP", {})
    relay_outbox.run_once(worker_rctx, settings)
    back_date_outbox(gone, relayed_at=120)
    assert purge_outbox.run_once(worker_rctx, settings) == 1
    assert list(OutboxRow.objects.using("admin").values_list("id", flat=True)) == [kept]


def test_stored_api_answers_past_their_retention_are_purged(ctx) -> None:
    from workers.sweep import purge_request_keys

    old = claim_key(ctx, "old", fingerprint("POST", "/api/work/", {}))
    store_response(ctx, old, 201, {})
    new = claim_key(ctx, "new", fingerprint("POST", "/api/work/", {}))
    store_response(ctx, new, 201, {})
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_storedresponse SET created_at = now() - interval '2 days'"
            " WHERE key = 'old'"
        )
    assert purge_request_keys.run_once(None, SETTINGS) == 1  # type: ignore[arg-type]
    from workqueue.models import StoredResponse

    assert list(StoredResponse.objects.using("admin").values_list("key", flat=True)) == ["new"]


def test_discarded_items_go_with_the_dead_letters(ctx, worker_rctx) -> None:
    [item] = _claimed(ctx, worker_rctx, 1)
    WorkItem.objects.using("admin").filter(pk=item.id).update(status=Status.DISCARDED)
    back_date(item.id, updated_at=8000)
    settings = SweepSettings(batch=10, item_retention_s=3600, dead_letter_retention_s=7200)
    assert purge_items.run_once(worker_rctx, settings) == (0, 1)


def _server_autovacuum() -> bool:
    with connections["admin"].cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return cursor.fetchone()[0] == "on"


@contextmanager
def _table_autovacuum_off() -> Iterator[None]:
    """The work item table's own storage parameter turns autovacuum off (committed: the
    store reads it on the system login), and is reset afterwards."""
    with connections["admin"].cursor() as cursor:
        cursor.execute("ALTER TABLE workqueue_workitem SET (autovacuum_enabled = false)")
    try:
        yield
    finally:
        with connections["admin"].cursor() as cursor:
            cursor.execute("ALTER TABLE workqueue_workitem RESET (autovacuum_enabled)")


def test_autovacuum_is_read_from_the_server_and_from_the_table() -> None:
    assert runtime.autovacuum_on() is _server_autovacuum()
    with _table_autovacuum_off():
        assert runtime.autovacuum_on() is False
    assert runtime.autovacuum_on() is _server_autovacuum()


def _purge_one_done_item(ctx: OpContext, rctx, settings: SweepSettings) -> None:  # type: ignore[no-untyped-def]
    [item] = _claimed(ctx, rctx, 1)
    WorkItem.objects.using("admin").filter(pk=item.id).update(status=Status.DONE)
    back_date(item.id, updated_at=8000)
    assert purge_items.run_once(rctx, settings) == (1, 0)


def _autovacuum_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [event_text(r) for r in caplog.records if event_name(r) == "autovacuum_off"]


def test_the_first_purge_without_autovacuum_says_once_how_to_vacuum(
    ctx, worker_rctx, caplog, monkeypatch
) -> None:
    monkeypatch.setitem(purge_items._autovacuum, "checked", False)
    settings = SweepSettings(batch=10, item_retention_s=3600)
    caplog.set_level(logging.WARNING, logger="workers.sweep.purge_items")
    with _table_autovacuum_off():
        assert purge_items.run_once(worker_rctx, settings) == (0, 0)  # nothing purged: no word
        assert _autovacuum_warnings(caplog) == []
        _purge_one_done_item(ctx, worker_rctx, settings)
        _purge_one_done_item(ctx, worker_rctx, settings)
    [warning] = _autovacuum_warnings(caplog)
    assert 'table="workqueue_workitem"' in warning
    assert "turn autovacuum on" in warning and "VACUUM workqueue_workitem" in warning


def test_a_purge_with_autovacuum_on_says_nothing_of_it(
    ctx, worker_rctx, caplog, monkeypatch
) -> None:
    if not _server_autovacuum():
        pytest.skip("this server runs with autovacuum off (the purge then warns, as tested above)")
    monkeypatch.setitem(purge_items._autovacuum, "checked", False)
    caplog.set_level(logging.WARNING, logger="workers.sweep.purge_items")
    _purge_one_done_item(ctx, worker_rctx, SweepSettings(batch=10, item_retention_s=3600))
    assert _autovacuum_warnings(caplog) == []


def test_expired_sessions_are_purged_in_bounded_batches() -> None:
    for _ in range(5):
        SessionStore().create()
    live = SessionStore()
    live.create()
    Session.objects.using("admin").exclude(session_key=live.session_key).update(
        expire_date=Session.objects.using("admin").get(session_key=live.session_key).expire_date
        - timedelta(days=30)
    )
    # The sessions table is the site's: a site that has not asked keeps its sessions.
    assert purge_sessions.run_once(None, SETTINGS) == 0  # type: ignore[arg-type]
    asked = dataclasses.replace(SETTINGS, purge_sessions=True)
    assert SweepSettings().purge_sessions  # the reference site asks
    assert purge_sessions.run_once(None, asked) == 4  # type: ignore[arg-type]
    assert purge_sessions.run_once(None, asked) == 1  # type: ignore[arg-type]
    assert list(Session.objects.using("admin").values_list("session_key", flat=True)) == [
        live.session_key
    ]


def test_the_ten_deepest_tenants_per_lane_and_no_more(worker_rctx, make_ctx) -> None:
    tenants = [make_ctx() for _ in range(12)]
    for depth, ctx in enumerate(tenants, start=1):
        api.enqueue_many(ctx, [api.NewItem("NOOP", {}) for _ in range(depth)])
    top = read_queue_gauges().top_tenants
    assert [row["items"] for row in top] == list(range(12, 2, -1))
    assert [row["rank"] for row in top] == list(range(1, 11))
    assert top[0]["org_id"] == str(tenants[-1].org_id)


def test_gauges_read_back_dated_rows(ctx, make_ctx, worker_rctx, settings) -> None:
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", "bulk"]}
    [dead] = _claimed(ctx, worker_rctx, 1)
    WorkItem.objects.using("admin").filter(pk=dead.id).update(status=Status.FAILED)
    waiting = api.enqueue(ctx, "NOOP", {})[0]
    api.enqueue(make_ctx(), "NOOP", {}, lane="bulk")
    back_date(waiting.id, available_at=120)
    row_id = emit(ctx, "work.NOOP", {})
    back_date_outbox(row_id, created_at=45)
    gauges = read_queue_gauges()
    assert 119 < gauges.oldest_age_s < 150
    assert gauges.failed == 1
    assert 44 < gauges.outbox_lag_s < 80 and gauges.outbox_pending == 1
    counts = {(r["lane"], r["kind"], r["status"]): r["items"] for r in gauges.items}
    assert counts == {
        ("default", "NOOP", "pending"): 1,
        ("bulk", "NOOP", "pending"): 1,
        ("default", "NOOP", "failed"): 1,
    }


def test_a_scrape_reads_the_database_at_most_once_per_cache_period(ctx) -> None:
    from prometheus_client import generate_latest

    from workers.gauges import registry

    GAUGES.forget()
    before = GAUGES.reads
    for _ in range(10):
        page = generate_latest(registry()).decode()
    assert GAUGES.reads == before + 1
    assert "workqueue_queue_oldest_age_seconds" in page and "workqueue_outbox_lag_seconds" in page
    # Never a tenant in a label: one series per tenant would grow without bound, and /metrics
    # carries no tenant's data (the ten deepest appear by rank).
    assert 'org_id="' not in page and 'org="' not in page


def test_one_pass_runs_every_step_and_a_held_lock_skips_it(ctx, worker_rctx) -> None:
    result = sweep_once(SETTINGS)
    assert result is not None and not result.failed
    assert list(result.results) == [
        "rescue",
        "requeue_stale",
        "rotate_ready",
        "relay_outbox",
        "enqueue_schedules",
        "keep_minutes",
        "roll_up_minutes",
        "purge_outbox",
        "move_history",
        "purge_items",
        "purge_sessions",
        "purge_request_keys",
        "purge_rate_buckets",
    ]
    from django.db import transaction

    with transaction.atomic(using="admin"), connections["admin"].cursor() as cursor:
        cursor.execute("INSERT INTO workqueue_mutex VALUES (%s) ON CONFLICT DO NOTHING", [MUTEX])
        cursor.execute("SELECT FROM workqueue_mutex WHERE name = %s FOR UPDATE", [MUTEX])
        assert sweep_once(SETTINGS) is None
    assert sweep_once(SETTINGS) is not None


def test_a_failing_step_is_logged_and_the_pass_goes_on(caplog) -> None:
    def broken(rctx, settings):  # type: ignore[no-untyped-def]
        raise RuntimeError("step broke")

    seen = []
    steps = [("broken", broken), ("after", lambda rctx, settings: seen.append(1) or 1)]
    result = sweep_once(SETTINGS, steps=steps)
    assert result is not None and result.failed == ["broken"] and seen == [1]
    assert sum('sweep_step_failed step="broken"' in event_text(r) for r in caplog.records) == 1


def test_sweep_once_by_call_command(ctx, worker_rctx, capsys) -> None:
    [item] = _claimed(ctx, worker_rctx, 1)
    back_date(item.id, lease_expires_at=90)
    call_command("sweep", once=True)
    out = capsys.readouterr().out.splitlines()
    handed_back = (
        "requeue_stale: stale claims handed back: requeued 1, dead lettered 0, cancelled 0"
    )
    assert handed_back in out
    assert "purge_items: finished items purged: done 0, failed 0" in out
    assert out[-1].startswith("sweep took ")
    assert row(item.id).status == Status.PENDING


def test_sweep_once_json_for_scripts(ctx, worker_rctx, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    [item] = _claimed(ctx, worker_rctx, 1)
    back_date(item.id, lease_expires_at=90)
    call_command("sweep", once=True, json=True)
    result = json.loads(capsys.readouterr().out)
    assert result["skipped"] is False and result["failed"] == []
    assert result["steps"]["requeue_stale"] == {"requeued": 1, "dead_lettered": 0, "cancelled": 0}
    assert result["steps"]["relay_outbox"] == {"enqueued": 0, "published": 0, "failed": 0}
    assert result["steps"]["purge_outbox"] == {"count": 0}
    assert isinstance(result["took_s"], float)
    with pytest.raises(CommandError, match="--json: only with --once"):
        call_command("sweep", json=True)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            {"ITEM_RETENTION_S": -1},
            r"WORKQUEUE\['ITEM_RETENTION_S'\]: Input should be greater than or equal to 0",
        ),
        ({"SWEEP_BATCH": 0}, r"WORKQUEUE\['SWEEP_BATCH'\]: Input should be greater than"),
        ({"SWEEP_INTERVAL_S": "soon"}, r"WORKQUEUE\['SWEEP_INTERVAL_S'\]: .* \(got 'soon'\)"),
        (
            {"SWEEP_BACTH": 10},
            r"WORKQUEUE\['SWEEP_BACTH'\]: no such setting \(did you mean 'SWEEP_BATCH'\?\)",
        ),
    ],
)
def test_a_bad_setting_is_one_line(given: dict[str, object], says: str) -> None:
    with queue_settings(**given):
        with pytest.raises(ImproperlyConfigured, match=says) as raised:
            SweepSettings()
        assert "\n" not in str(raised.value)
        with pytest.raises(CommandError, match=says):
            call_command("sweep", once=True)
