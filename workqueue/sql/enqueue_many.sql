-- enqueue_many: insert many pending items (parallel arrays, one per column) in the tenant this statement names for its own transaction, never overwriting (rows whose id or key exists insert nothing), with their ready rows; announce once on work_available; return the ids inserted
-- A done item in history keeps its id and key taken (enqueue.sql says how)
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
), made_pending AS (
    {enqueue_many_rows}
     WHERE NOT EXISTS (SELECT FROM workqueue_workitem h
                        WHERE tenant IS NOT NULL  -- asked after the tenant is named, at the join, never on i alone
                          AND h.status = 'done'
                          AND (h.id = i.id
                               OR (h.org_id = %(org_id)s::uuid AND h.idempotency_key = i.idempotency_key)))
    ON CONFLICT DO NOTHING
    RETURNING id, org_id, lane, kind, priority, available_at, concurrency_key, rate_key, status
), {ready_rows}, announced AS (
    SELECT pg_notify('work_available', %(notice)s::text) WHERE EXISTS (SELECT FROM made_pending)
)
SELECT id FROM made_pending, (SELECT count(*) FROM announced) AS a
