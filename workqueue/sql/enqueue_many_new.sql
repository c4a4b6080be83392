-- enqueue_many_new: insert many pending items whose ids were minted for this call and which carry no idempotency key (nothing can collide, so no conflict check per row, and every row given is inserted), given as parallel arrays, with their ready rows, in the tenant this statement names for its own transaction; announce on work_available (delivered at commit, once however many chunks announce the same lane); returns no rows
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}, pg_notify('work_available', %(notice)s::text)
), made_pending AS (
    {enqueue_many_rows}
    RETURNING id, org_id, lane, kind, priority, available_at, concurrency_key, rate_key, status
), {ready_rows}
SELECT WHERE false
