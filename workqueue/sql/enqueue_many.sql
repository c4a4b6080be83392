-- enqueue_many: insert many pending items in one statement, never overwriting; rows whose id or key exists insert nothing
INSERT INTO workqueue_workitem (
    id, org_id, kind, lane, status, payload, idempotency_key, priority, available_at,
    claimed_by, claim_token, lease_expires_at, attempts, max_attempts, last_error,
    created_by, updated_by, request_id, traceparent, created_at, updated_at)
SELECT i.id, %(org_id)s, i.kind, i.lane, 'pending', i.payload::jsonb, i.idempotency_key,
       i.priority, COALESCE(i.available_at, now()),
       NULL, NULL, NULL, 0, i.max_attempts, '',
       %(created_by)s, %(created_by)s, %(request_id)s, %(traceparent)s, now(), now()
  FROM unnest(%(ids)s::uuid[], %(kinds)s::text[], %(lanes)s::text[], %(payloads)s::text[],
              %(keys)s::text[], %(priorities)s::smallint[], %(available_ats)s::timestamptz[],
              %(max_attempts)s::int[])
       AS i(id, kind, lane, payload, idempotency_key, priority, available_at, max_attempts)
ON CONFLICT DO NOTHING
RETURNING id
