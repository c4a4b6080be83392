-- enqueue: insert one pending item, never overwriting; an existing id or idempotency key inserts nothing (the caller reads that row back)
INSERT INTO workqueue_workitem (
    id, org_id, kind, lane, status, payload, idempotency_key, priority, available_at,
    claimed_by, claim_token, lease_expires_at, attempts, max_attempts, last_error,
    created_by, updated_by, request_id, traceparent, created_at, updated_at)
VALUES (
    %(id)s, %(org_id)s, %(kind)s, %(lane)s, 'pending', %(payload)s::jsonb, %(idempotency_key)s,
    %(priority)s, COALESCE(%(available_at)s::timestamptz, now()),
    NULL, NULL, NULL, 0, %(max_attempts)s, '',
    %(created_by)s, %(created_by)s, %(request_id)s, %(traceparent)s, now(), now())
ON CONFLICT DO NOTHING
RETURNING *
