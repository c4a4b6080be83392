-- read_results: the result (JSON text, NULL when none) of each item named, in the tenant the transaction names (row-level security hides every other tenant's rows, and the org is named too, for a login that bypasses it); an id not found is absent
SELECT id, result::text
  FROM workqueue_workitem
 WHERE id = ANY(%(ids)s::uuid[]) AND org_id = %(org_id)s::uuid
