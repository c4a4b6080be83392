-- enqueue: insert one pending item in the tenant this statement names for its own transaction, never overwriting (a taken id or idempotency key inserts nothing and returns no row); announce its lane on work_available (delivered at commit); return only what the server stamped
-- Every column and the value it gets, and what comes back, are made from workqueue/columns.py (the caller's columns as parameters, the rest as the queue stamps them).
-- The announcement is a column of RETURNING, so it is made for an inserted row only; a plain INSERT, not one inside CTEs
-- that count what it returned: those cost the server a measurable share of a single enqueue.
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
)
INSERT INTO workqueue_workitem ({item_columns})
SELECT {item_values}
  FROM tenant
ON CONFLICT DO NOTHING
RETURNING {returned}, pg_notify('work_available', %(lane)s::text)::text AS announced
