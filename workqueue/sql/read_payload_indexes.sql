-- read_payload_indexes: the item table and each of its history children, with the first column of every index of all its rows (no predicate) that is the payload or an expression of it, as PostgreSQL prints it, and the index's access method; a table with no such index comes once with NULLs (a search by payload field uses an index only when every table has one)
WITH tables AS (
    SELECT 'workqueue_workitem'::regclass AS tbl
    UNION ALL
    SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = 'workqueue_workitem'::regclass
)
SELECT t.tbl::text AS tbl, x.expr, x.method
  FROM tables t
  LEFT JOIN LATERAL (
    SELECT pg_get_indexdef(i.indexrelid, 1, true) AS expr, am.amname AS method
      FROM pg_index i
      JOIN pg_class c ON c.oid = i.indexrelid
      JOIN pg_am am ON am.oid = c.relam
     WHERE i.indrelid = t.tbl AND i.indpred IS NULL AND i.indisvalid
       AND pg_get_indexdef(i.indexrelid, 1, true) LIKE '%%payload%%'
  ) x ON true
