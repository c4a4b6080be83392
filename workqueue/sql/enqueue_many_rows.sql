-- enqueue_many_rows: insert the rows of one JSON array as pending items of the tenant the statement names (the insert shared by enqueue_many and enqueue_many_new, which add what follows it)
INSERT INTO workqueue_workitem (
    id, org_id, kind, lane, status, payload, idempotency_key, concurrency_key, priority,
    available_at,
    claimed_by, claim_token, lease_expires_at, attempts, max_attempts, last_error,
    created_by, updated_by, request_id, traceparent, created_at, updated_at)
SELECT i.id, %(org_id)s::uuid, i.kind, i.lane, 'pending', i.payload, i.idempotency_key,
       i.concurrency_key, i.priority, COALESCE(i.available_at, now()),
       NULL, NULL, NULL, 0, i.max_attempts, '',
       %(created_by)s::text, %(created_by)s::text, %(request_id)s::uuid,
       %(traceparent)s::text, now(), now()
  FROM tenant,
       jsonb_to_recordset(%(items)s::jsonb)
       AS i(id uuid, kind text, lane text, payload jsonb, idempotency_key text,
            concurrency_key text, priority smallint, available_at timestamptz, max_attempts integer)
