-- enqueue_many_new: insert many pending items whose ids were minted for this call and which carry no idempotency key (nothing can collide, so no conflict check per row, and every row given is inserted), given as parallel arrays, in the tenant this statement names for its own transaction; announce on work_available (delivered at commit, once however many chunks announce the same lane); returns no rows
-- A plain INSERT, not one inside a CTE with RETURNING and counts: those cost a measurable share of a batch's server time.
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}, pg_notify('work_available', %(notice)s::text)
)
{enqueue_many_rows}
