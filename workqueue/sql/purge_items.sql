-- purge_items: delete up to batch done or failed items last changed before `before`, in every tenant; returns how many
WITH doomed AS (
    SELECT id
      FROM workqueue_workitem
     WHERE status IN ('done', 'failed') AND updated_at < %(before)s::timestamptz
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM workqueue_workitem AS w USING doomed WHERE w.id = doomed.id RETURNING 1
)
SELECT count(*) FROM gone
