-- read_statuses: where each item named stands (status, attempts, progress, result, last error), in the tenant the transaction names (row-level security, and the org named too, for a login that bypasses it); an id not found is absent
SELECT id, status, attempts, max_attempts, progress::text, result::text, last_error
  FROM workqueue_workitem
 WHERE id = ANY(%(ids)s::uuid[]) AND org_id = %(org_id)s::uuid
