-- enqueue_many: insert many pending items from one JSON array in the tenant this statement names for its own transaction, never overwriting (rows whose id or key exists insert nothing); announce once on work_available; return the ids inserted
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
), inserted AS (
    INSERT INTO workqueue_workitem (
        id, org_id, kind, lane, status, payload, idempotency_key, priority, available_at,
        claimed_by, claim_token, lease_expires_at, attempts, max_attempts, last_error,
        created_by, updated_by, request_id, traceparent, created_at, updated_at)
    {enqueue_many_rows}
    ON CONFLICT DO NOTHING
    RETURNING id
), announced AS (
    SELECT pg_notify('work_available', %(notice)s::text) WHERE EXISTS (SELECT FROM inserted)
)
SELECT id FROM inserted, (SELECT count(*) FROM announced) AS a
