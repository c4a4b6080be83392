-- enqueue: insert one pending item in the tenant this statement names for its own transaction, never overwriting (a taken id or idempotency key inserts nothing and returns no row); announce its lane on work_available (delivered at commit); return only what the server stamped
-- The announcement is a column of RETURNING, so it is made for an inserted row only; a plain INSERT, not one inside CTEs
-- that count what it returned: those cost the server 6% of a single enqueue.
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
)
INSERT INTO workqueue_workitem (
    id, org_id, kind, lane, status, payload, idempotency_key, concurrency_key, priority,
    available_at,
    claimed_by, claim_token, lease_expires_at, attempts, max_attempts, last_error,
    created_by, updated_by, request_id, traceparent, created_at, updated_at)
SELECT %(id)s::uuid, %(org_id)s::uuid, %(kind)s::text, %(lane)s::text, 'pending',
       %(payload)s::jsonb, %(idempotency_key)s::text, %(concurrency_key)s::text,
       %(priority)s::smallint,
       COALESCE(%(available_at)s::timestamptz, now()),
       NULL, NULL, NULL, 0, %(max_attempts)s::integer, '',
       %(created_by)s::text, %(created_by)s::text, %(request_id)s::uuid,
       %(traceparent)s::text, now(), now()
  FROM tenant
ON CONFLICT DO NOTHING
RETURNING id, available_at, created_at, pg_notify('work_available', %(lane)s::text)::text AS announced
