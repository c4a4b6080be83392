-- enqueue_citus: enqueue's Citus form (WORKQUEUE['CITUS']): insert one pending item in the tenant the transaction names, never overwriting (a taken id or idempotency key inserts nothing and returns no row); announce its lane on work_available from the coordinator (delivered at commit); return only what the server stamped. Its ready row is ready_row_citus, sent next
-- Citus runs a CTE that inserts the rows another CTE returned by COPY, which row-level security refuses, and plans no
-- correlated subquery beside a CTE: so no ready_rows here and no history probe (a Citus site has HISTORY = False).
WITH made_pending AS (
    INSERT INTO workqueue_workitem ({item_columns})
    VALUES ({item_values})
    ON CONFLICT DO NOTHING
    RETURNING *
)
SELECT {returned}, pg_notify('work_available', %(lane)s::text)::text AS announced
  FROM made_pending
