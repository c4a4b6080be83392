-- taken_ids: which of the given item ids another tenant's item already holds (read before a batch with ids of the caller's choosing is inserted, so a clash refuses the whole batch and stores nothing)
SELECT id FROM workqueue_workitem
 WHERE id = ANY(%(ids)s::uuid[]) AND org_id <> %(org_id)s::uuid
