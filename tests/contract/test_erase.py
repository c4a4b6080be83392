"""Erasing a tenant: every row of it gone from every table of ours that carries an org_id
(history's children too), its audit entries kept with their data redacted, another tenant's
rows untouched, table by table; refused while its items run unless forced; a dry run and bad
input change nothing. Erasing one person's data: the personal fields of the payloads that name
them redacted, in history too, with their items' audit entries."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta

import psycopg
import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connections

from outbox.emit import emit
from outbox.relay import relay_pending
from tests.helpers import back_date, dead_letter
from workqueue import api
from workqueue.claim import claim
from workqueue.erase import AUDIT, ERASED, ITEMS, tenant_tables
from workqueue.fence import Fence
from workqueue.history import keep_history, move_history
from workqueue.pauses import SITE_ORG_ID
from workqueue.settle import complete_many

DAY_S = 86400.0
OURS = ("workqueue", "tenancy", "audit", "outbox", "workers")
# Tables with an org_id the erase leaves, and why: the tenant's own registry (the site deletes
# the org and its memberships once the erase is done).
NOT_ERASED = {"workqueue_tenancy_membership"}


class Mail(api.Payload):
    email: str
    n: int = 0


# In the default lane: a lane of its own would be declared for every test of the session.
api.register(api.Kind("ERASE_MAIL", Mail, personal=("email",)))


def _sql(statement: str, params: list[object] | None = None) -> list[tuple[object, ...]]:
    with connections["admin"].cursor() as cursor:
        cursor.execute(statement, params or [])
        return cursor.fetchall() if cursor.description else []


def _drop_every_span() -> None:
    _sql("SELECT * FROM workqueue_history_drop_v1('infinity')")


@pytest.fixture(autouse=True)
def no_spans(committed: None):  # type: ignore[no-untyped-def]
    _drop_every_span()
    yield
    _drop_every_span()


def _tenant_tables() -> list[str]:
    """Every table (history's children and the ring's partitions too) with an org_id column."""
    return [
        r[0]
        for r in _sql(
            "SELECT c.table_name FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE c.table_schema = current_schema() AND c.column_name = 'org_id'"
            " AND t.table_type = 'BASE TABLE' ORDER BY 1"
        )
        if r[0] not in NOT_ERASED
    ]


def _counts(org_id: uuid.UUID) -> dict[str, int]:
    """The tenant's rows in each table by itself (ONLY: a child counted apart)."""
    return {
        t: int(_sql(f"SELECT count(*) FROM ONLY {t} WHERE org_id = %s", [org_id])[0][0])
        for t in _tenant_tables()
    }


def _fill(ctx, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    """Rows of ``ctx``'s tenant in every table: items pending and in history (with attempts),
    dead letters (audited), a workflow, outbox rows pending and relayed, a stored response,
    minutes, a share, a rate limit with its bucket, a shipment with its notice."""
    lane = f"fill-{uuid.uuid4().hex[:8]}"
    done = [api.enqueue(ctx, "NOOP", {"n": i}, lane=lane)[0] for i in range(3)]
    held = [item for _, item in claim(worker_rctx, lane, None, "w1", 30, 10)]
    complete_many([Fence.of(h) for h in held], ['{"ok": 1}'] * len(held))
    for item in done:
        back_date(item.id, updated_at=120)
    # A Django task's record follows its item into history.
    _sql(
        "INSERT INTO workqueue_tasks_taskrecord (item_id, org_id, worker_ids, started_at,"
        " last_attempted_at, errors) VALUES (%s, %s, '[]', now(), now(), '[]')",
        [done[0].id, ctx.org_id],
    )
    keep_history(DAY_S, DAY_S)
    now = _sql("SELECT now()")[0][0]
    assert move_history(now - timedelta(days=1), 60.0).moved >= 3
    api.enqueue(ctx, "NOOP", {"n": 9})
    dead_letter(ctx, worker_rctx, payload={"n": 7})
    wf = api.Workflow()
    wf.chain(
        api.NewItem("NOOP", {"n": 1}), api.NewItem("NOOP", {"n": 2}), api.NewItem("NOOP", {"n": 3})
    )
    api.enqueue_workflow(ctx, wf)
    emit(ctx, "work.NOOP", {"n": 5})
    relay_pending(worker_rctx)
    emit(ctx, "work.NOOP", {"n": 6})  # left pending
    org = ctx.org_id
    _sql(
        "INSERT INTO workqueue_storedresponse (id, org_id, user_id, key, fingerprint,"
        " status_code, body, created_at) VALUES (gen_random_uuid(), %s, 'u', 'k', 'f', 201,"
        " '{}', now())",
        [org],
    )
    _sql(
        "INSERT INTO workqueue_laneminute (minute, org_id, lane, done, failed, dead, waits,"
        " pending) VALUES (date_trunc('minute', now()), %s, 'default', 3, 0, 1, '{}', 0)",
        [org],
    )
    _sql("INSERT INTO workqueue_tenantshare (org_id, weight) VALUES (%s, 2)", [org])
    [(limit,)] = _sql(
        "INSERT INTO workqueue_ratelimit (scope, target, count, period_s, burst, set_by)"
        " VALUES ('tenant', %s, 5, 1, 5, 'op') RETURNING id",
        [str(org)],
    )
    _sql(
        "INSERT INTO workqueue_ratebucket (limit_id, key, tat, free_at) VALUES (%s, %s, now(),"
        " now())",
        [limit, str(org)],
    )
    [(shipment,)] = _sql(
        "INSERT INTO workqueue_demo_shipment (id, org_id, reference, recipient_email, status,"
        " version, notified_version, created_at, updated_at) VALUES (gen_random_uuid(), %s, %s,"
        " 'a@b.c', 'created', 1, 0, now(), now()) RETURNING id",
        [org, f"ref-{uuid.uuid4().hex[:6]}"],
    )
    _sql(
        "INSERT INTO workqueue_demo_shipmentnotice (id, org_id, shipment_id, version, channel,"
        " sent_at) VALUES (gen_random_uuid(), %s, %s, 1, 'email', now())",
        [org, shipment],
    )


def _rate_rows(org_id: uuid.UUID) -> int:
    return int(
        _sql(
            "SELECT (SELECT count(*) FROM workqueue_ratelimit WHERE target = %s)"
            " + (SELECT count(*) FROM workqueue_ratebucket WHERE key = %s)",
            [str(org_id), str(org_id)],
        )[0][0]
    )


def _queue(*args: str) -> str:
    out = io.StringIO()
    call_command("queue", "erase", *args, stdout=out)
    return out.getvalue()


def test_every_table_with_an_org_id_is_erased_or_named_here() -> None:
    """A new tenant table fails this until the erase reaches it (register_tenant_table)."""
    erased = set(tenant_tables())
    assert erased >= {ITEMS, AUDIT, "workqueue_outbox_outboxrow", "workqueue_tasks_taskrecord"}
    for config in apps.get_app_configs():
        if config.name.split(".")[0] not in OURS:
            continue
        for model in config.get_models():
            names = {f.column for f in model._meta.concrete_fields}
            table = model._meta.db_table
            if "org_id" in names and table not in NOT_ERASED:
                assert table in erased, f"{table} has an org_id the erase does not reach"


def test_a_tenant_is_erased_everywhere_and_another_is_untouched(make_ctx, worker_rctx) -> None:
    gone, kept = make_ctx(), make_ctx()
    _fill(gone, worker_rctx)
    _fill(kept, worker_rctx)
    before_gone, before_kept = _counts(gone.org_id), _counts(kept.org_id)
    # Every kind of row is there, history's children included.
    assert all(before_gone[t] for t in ("workqueue_attempt", "workqueue_dependency"))
    for child in (
        "workqueue_workitem_done_",
        "workqueue_attempt_done_",
        "workqueue_tasks_taskrecord_done_",
    ):
        assert any(t.startswith(child) and n for t, n in before_gone.items()), child
    entries = before_gone[AUDIT]
    assert entries and _rate_rows(gone.org_id) == 2

    out = _queue("--tenant", str(gone.org_id), "--dry-run")
    assert "dry run: nothing changed" in out and ITEMS in out
    assert _counts(gone.org_id) == before_gone

    out = _queue("--tenant", str(gone.org_id), "--batch", "2")
    assert "nothing of it is left" in out
    after = _counts(gone.org_id)
    assert {t: n for t, n in after.items() if n and t != AUDIT} == {}
    assert _rate_rows(gone.org_id) == 0
    # The audit skeleton stays: who, what, when, on which subject; the data redacted.
    assert after[AUDIT] == entries
    skeleton = _sql(
        "SELECT actor, action, subject_id, created_at, data FROM workqueue_audit_auditentry"
        " WHERE org_id = %s",
        [gone.org_id],
    )
    assert {json.dumps(r[4]) if not isinstance(r[4], str) else r[4] for r in skeleton} == {
        '{"redacted": true}'
    }
    assert all(r[0] and r[1] and r[2] and r[3] for r in skeleton)
    assert "work.dead_lettered" in {r[1] for r in skeleton}
    # The other tenant: every table as it was, and its data intact.
    assert _counts(kept.org_id) == before_kept
    assert _rate_rows(kept.org_id) == 2
    assert not _sql(
        'SELECT 1 FROM workqueue_audit_auditentry WHERE org_id = %s AND data = \'{"redacted":'
        " true}'",
        [kept.org_id],
    )
    # The erase itself is audited, under the site's id, with its counts table by table.
    started, finished = _sql(
        "SELECT action, data FROM workqueue_audit_auditentry WHERE org_id = %s"
        " AND subject_id = %s ORDER BY created_at, action DESC",
        [SITE_ORG_ID, str(gone.org_id)],
    )
    assert started[0] == "queue.erase_started" and finished[0] == "queue.erase_finished"
    found, done = _json(started[1])["found"], _json(finished[1])
    assert found[ITEMS] == sum(n for t, n in before_gone.items() if t.startswith(ITEMS))
    assert set(done["left"].values()) == {0} and done["erased"][ITEMS] == found[ITEMS]
    # Again: nothing to do, nothing changed.
    assert "nothing of it is left" in _queue("--tenant", str(gone.org_id))
    assert _counts(kept.org_id) == before_kept


def _json(value: object) -> dict[str, object]:
    return json.loads(value) if isinstance(value, str) else value  # type: ignore[return-value]


def test_refused_while_its_items_run_and_forced_works(make_ctx, worker_rctx) -> None:
    ctx = make_ctx()
    lane = f"run-{uuid.uuid4().hex[:8]}"
    api.enqueue(ctx, "NOOP", {}, lane=lane)
    api.enqueue(ctx, "NOOP", {})
    [(item_ctx, held)] = claim(worker_rctx, lane, None, "w1", 30, 10)
    before = _counts(ctx.org_id)
    with pytest.raises(CommandError, match=r"1 running \(claimed\).*--force"):
        _queue("--tenant", str(ctx.org_id))
    assert _counts(ctx.org_id) == before
    assert not _sql("SELECT 1 FROM workqueue_audit_auditentry WHERE org_id = %s", [SITE_ORG_ID])
    assert "nothing of it is left" in _queue("--tenant", str(ctx.org_id), "--force")
    assert not any(_counts(ctx.org_id).values())
    # Its holder's next write is refused: the item is gone.
    with pytest.raises(api.Conflict):
        from workqueue.settle import complete

        complete(item_ctx, held)


def test_an_unknown_tenant_or_bad_input_is_one_line_and_changes_nothing(make_ctx) -> None:
    ctx = make_ctx()
    api.enqueue(ctx, "NOOP", {})
    before = _counts(ctx.org_id)
    for args, said in (
        (("--tenant", "no-such-tenant"), "--tenant"),
        (("--tenant", str(uuid.uuid4())), "--tenant"),
        ((), "name a tenant"),
        (("--tenant", str(ctx.org_id), "--batch", "0"), "batch"),
        (("--tenant", str(ctx.org_id), "--pause-ms", "-1"), "--pause-ms"),
        (("--subject", "email"), "FIELD=VALUE"),
        (("--subject", "phone=1"), "no kind declares 'phone' personal"),
    ):
        with pytest.raises(CommandError, match=said) as caught:
            _queue(*args)
        assert "\n" not in str(caught.value)
    assert _counts(ctx.org_id) == before
    with pytest.raises(api.InvalidPayload, match="org_id"):
        api.erase("op", SITE_ORG_ID)


def test_a_subjects_personal_fields_are_redacted_in_history_and_audit(
    make_ctx, worker_rctx
) -> None:
    ctx, other = make_ctx(), make_ctx()
    ann = [api.enqueue(ctx, "ERASE_MAIL", {"email": "ann@x.org", "n": i})[0] for i in range(3)]
    bob = api.enqueue(ctx, "ERASE_MAIL", {"email": "bob@x.org"})[0]
    # One of Ann's done and moved to history, one a dead letter (its audit entry keeps it).
    [(_, first)] = claim(worker_rctx, "default", ["ERASE_MAIL"], "w1", 30, 1)
    complete_many([Fence.of(first)], ["null"])
    theirs = api.enqueue(other, "ERASE_MAIL", {"email": "ann@x.org"})[0]
    back_date(first.id, updated_at=120)
    keep_history(DAY_S, DAY_S)
    assert move_history(_sql("SELECT now()")[0][0] - timedelta(days=1), 60.0).moved == 1
    dead = dead_letter(ctx, worker_rctx, payload={"email": "ann@x.org"}, kind="ERASE_MAIL")
    # Waiting in the outbox: a work row's payload is its item's.
    row_id = emit(ctx, "work.ERASE_MAIL", {"email": "ann@x.org", "n": 5})

    dry = api.erase("op", ctx.org_id, subject=("email", "ann@x.org"), dry_run=True)
    outbox = "ERASE_MAIL (workqueue_outbox_outboxrow)"
    assert dry.found == {"ERASE_MAIL": 4, outbox: 1} and dry.dry_run
    out = _queue(
        "--subject",
        "email=ann@x.org",
        "--tenant",
        str(ctx.org_id),
        "--batch",
        "2",
        "--pause-ms",
        "1",
    )
    assert "nothing of it is left" in out

    def payload(item_id: uuid.UUID) -> dict[str, object]:
        return _json(_sql("SELECT payload FROM workqueue_workitem WHERE id = %s", [item_id])[0][0])

    for item in [*ann, dead]:
        assert payload(item.id)["email"] == ERASED
    assert payload(ann[2].id)["n"] == 2  # what is not personal stays
    assert payload(bob.id)["email"] == "bob@x.org"
    assert payload(theirs.id)["email"] == "ann@x.org"  # another tenant's: not asked
    [(row,)] = _sql("SELECT payload FROM workqueue_outbox_outboxrow WHERE id = %s", [row_id])
    assert _json(row) == {"email": ERASED, "n": 5}
    [(data,)] = _sql(
        "SELECT data FROM workqueue_audit_auditentry WHERE subject_id = %s", [str(dead.id)]
    )
    assert _json(data) == {"redacted": True}
    # Audited with the field's name, never its value.
    trail = _sql(
        "SELECT data::text FROM workqueue_audit_auditentry WHERE org_id = %s", [SITE_ORG_ID]
    )
    assert len(trail) == 2 and not any("ann@x.org" in r[0] for r in trail)


@pytest.mark.parametrize("bad", [("nope",), ["email"], "email"])
def test_a_kinds_personal_fields_are_a_tuple_of_its_schemas_fields(bad: object) -> None:
    with pytest.raises(ValueError, match="personal must be a tuple of the schema's fields"):
        api.Kind("TEST_BAD_PERSONAL", Mail, personal=bad)  # type: ignore[arg-type]


def test_a_row_another_transaction_holds_is_left_and_a_second_run_takes_it(make_ctx) -> None:
    ctx = make_ctx()
    held = api.enqueue(ctx, "NOOP", {})[0]
    api.enqueue(ctx, "NOOP", {})
    dsn = connections["admin"].get_connection_params()
    with psycopg.connect(**dsn) as holder:
        holder.execute("SELECT 1 FROM workqueue_workitem WHERE id = %s FOR UPDATE", [held.id])
        result = api.erase("op", ctx.org_id)  # never waits for the lock: skips the row
        assert result.left[ITEMS] == 1 and not result.complete
        holder.rollback()
    assert api.erase("op", ctx.org_id).complete
    assert not any(_counts(ctx.org_id).values())
