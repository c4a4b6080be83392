"""The one-statement enqueue function (version 1). Its SQL is frozen here, as applied: a change
is a new migration (0006 drops it, the enqueue now being one plain statement)."""

from django.db import migrations

FORWARD = """
-- workqueue_enqueue: an enqueue in one round trip and one statement: it names the tenant for
-- row-level security, inserts the item as pending (never overwriting: a taken id or idempotency
-- key inserts nothing and returns no row), announces the lane on work_available (delivered at
-- commit), and puts back the tenant setting it found, so a caller's own transaction keeps its
-- tenant. SECURITY INVOKER: it runs as the caller's login, under its row-level security.
CREATE OR REPLACE FUNCTION workqueue_enqueue(
    p_org_id uuid, p_id uuid, p_kind text, p_lane text, p_payload jsonb,
    p_idempotency_key text, p_priority smallint, p_available_at timestamptz,
    p_max_attempts integer, p_created_by uuid, p_request_id uuid, p_traceparent text)
RETURNS SETOF workqueue_workitem
LANGUAGE plpgsql SECURITY INVOKER AS $$
DECLARE
    previous text := current_setting('app.org_id', true);
BEGIN
    PERFORM set_config('app.org_id', p_org_id::text, true);
    RETURN QUERY
    INSERT INTO workqueue_workitem (
        id, org_id, kind, lane, status, payload, idempotency_key, priority, available_at,
        claimed_by, claim_token, lease_expires_at, attempts, max_attempts, last_error,
        created_by, updated_by, request_id, traceparent, created_at, updated_at)
    VALUES (
        p_id, p_org_id, p_kind, p_lane, 'pending', p_payload, p_idempotency_key, p_priority,
        COALESCE(p_available_at, now()), NULL, NULL, NULL, 0, p_max_attempts, '',
        p_created_by, p_created_by, p_request_id, p_traceparent, now(), now())
    ON CONFLICT DO NOTHING
    RETURNING *;
    PERFORM pg_notify('work_available', p_lane);
    PERFORM set_config('app.org_id', COALESCE(previous, ''), true);
END
$$
"""

REVERSE = """
-- enqueue_function_reverse: undo enqueue_function.
DROP FUNCTION IF EXISTS workqueue_enqueue(
    uuid, uuid, text, text, jsonb, text, smallint, timestamptz, integer, uuid, uuid, text)
"""


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0002_row_level_security")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
