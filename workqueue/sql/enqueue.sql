-- enqueue: insert one pending item in the tenant this statement names for its own transaction, never overwriting (a taken id or idempotency key inserts nothing and returns no row), with its ready row; announce its lane on work_available (delivered at commit); return only what the server stamped
-- Every column and the value it gets, and what comes back, are made from workqueue/columns.py (the caller's columns as parameters, the rest as the queue stamps them).
-- The announcement is a column of the result, so it is made for an inserted row only.
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
), made_pending AS (
    INSERT INTO workqueue_workitem ({item_columns})
    SELECT {item_values}
      FROM tenant
    ON CONFLICT DO NOTHING
    RETURNING *
), {ready_rows}
SELECT {returned}, pg_notify('work_available', %(lane)s::text)::text AS announced
  FROM made_pending
