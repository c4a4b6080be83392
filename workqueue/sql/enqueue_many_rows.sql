-- enqueue_many_rows: insert the rows given as parallel arrays (one per column, element n of each making row n) as pending items of the tenant the statement names (the insert shared by enqueue_many and enqueue_many_new, which add what follows it)
INSERT INTO workqueue_workitem (
    id, org_id, kind, lane, status, payload, idempotency_key, concurrency_key, priority,
    available_at,
    claimed_by, claim_token, lease_expires_at, attempts, max_attempts, last_error,
    created_by, updated_by, request_id, traceparent, created_at, updated_at)
SELECT i.id, %(org_id)s::uuid, i.kind, i.lane, 'pending', i.payload::jsonb, i.idempotency_key,
       i.concurrency_key, i.priority, COALESCE(i.available_at, now()),
       NULL, NULL, NULL, 0, i.max_attempts, '',
       %(created_by)s::text, %(created_by)s::text, %(request_id)s::uuid,
       %(traceparent)s::text, now(), now()
  FROM tenant,
       unnest(%(ids)s::uuid[], %(kinds)s::text[], %(lanes)s::text[], %(payloads)s::text[],
              %(idempotency_keys)s::text[], %(concurrency_keys)s::text[],
              %(priorities)s::smallint[], %(available_ats)s::timestamptz[],
              %(max_attempts)s::integer[])
       AS i(id, kind, lane, payload, idempotency_key, concurrency_key, priority, available_at,
            max_attempts)
