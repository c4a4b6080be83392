-- enqueue_many: insert many pending items (parallel arrays, one per column) in the tenant this statement names for its own transaction, never overwriting (rows whose id or key exists insert nothing); announce once on work_available; return the ids inserted
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
), inserted AS (
    {enqueue_many_rows}
    ON CONFLICT DO NOTHING
    RETURNING id
), announced AS (
    SELECT pg_notify('work_available', %(notice)s::text) WHERE EXISTS (SELECT FROM inserted)
)
SELECT id FROM inserted, (SELECT count(*) FROM announced) AS a
