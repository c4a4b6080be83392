-- enqueue_many_new: insert many pending items whose ids were minted for this call and which carry no idempotency key (nothing can collide, so no conflict check per row), given as parallel arrays, in the tenant this statement names for its own transaction; announce once on work_available; return how many were inserted
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
), inserted AS (
    {enqueue_many_rows}
    RETURNING 1
), announced AS (
    SELECT pg_notify('work_available', %(notice)s::text) WHERE EXISTS (SELECT FROM inserted)
)
SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM announced)
