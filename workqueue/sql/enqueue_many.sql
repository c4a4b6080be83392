-- enqueue_many: insert many pending items in one statement from one JSON array, never overwriting; rows whose id or key exists insert nothing
INSERT INTO workqueue_workitem (
    id, org_id, kind, lane, status, payload, idempotency_key, priority, available_at,
    claimed_by, claim_token, lease_expires_at, attempts, max_attempts, last_error,
    created_by, updated_by, request_id, traceparent, created_at, updated_at)
SELECT i.id, %(org_id)s, i.kind, i.lane, 'pending', i.payload, i.idempotency_key,
       i.priority, COALESCE(i.available_at, now()),
       NULL, NULL, NULL, 0, i.max_attempts, '',
       %(created_by)s, %(created_by)s, %(request_id)s, %(traceparent)s, now(), now()
  FROM jsonb_to_recordset(%(items)s::jsonb)
       AS i(id uuid, kind text, lane text, payload jsonb, idempotency_key text,
            priority smallint, available_at timestamptz, max_attempts integer)
ON CONFLICT DO NOTHING
RETURNING id
