-- read_result: one Django task's work item (its result the task's return value) and its record, in the tenant the transaction names (row-level security hides every other tenant's); the columns are records.Stored's fields
SELECT w.status, w.payload::text AS payload, w.priority, w.lane, w.available_at, w.last_error,
       w.claimed_by, w.created_at, w.updated_at,
       r.worker_ids::text AS worker_ids, r.started_at, r.last_attempted_at,
       w.result::text AS return_value, r.errors::text AS errors
  FROM workqueue_workitem w
  LEFT JOIN workqueue_tasks_taskrecord r ON r.item_id = w.id
 WHERE w.id = %(id)s::uuid AND w.kind = %(kind)s::text
