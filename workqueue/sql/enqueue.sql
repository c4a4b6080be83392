-- enqueue: insert one pending item in the tenant this statement names for its own transaction, never overwriting (a taken id or idempotency key inserts nothing and returns no row), with its ready row; announce its lane on work_available (delivered at commit); return only what the server stamped
-- Every column and the value it gets, and what comes back, are made from workqueue/columns.py (the caller's columns as parameters, the rest as the queue stamps them).
-- The announcement is a column of the result, so it is made for an inserted row only.
-- A done item in history (workqueue/history.py) keeps its id and key taken: the unique indexes see the hot table only,
-- so the insert also asks the history children (an index probe each; an item moves whole in one statement, so every
-- snapshot sees it in one place or the other).
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
), made_pending AS (
    INSERT INTO workqueue_workitem ({item_columns})
    SELECT {item_values}
      FROM tenant
     WHERE NOT EXISTS (SELECT FROM workqueue_workitem h
                        WHERE tenant IS NOT NULL  -- asked after the tenant is named (a correlated subquery)
                          AND h.status = 'done'
                          AND (h.id = %(id)s::uuid
                               OR (h.org_id = %(org_id)s::uuid AND h.idempotency_key = %(idempotency_key)s::text)))
    ON CONFLICT DO NOTHING
    RETURNING *
), {ready_rows}
SELECT {returned}, pg_notify('work_available', %(lane)s::text)::text AS announced
  FROM made_pending
